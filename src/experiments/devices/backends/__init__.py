"""What differs between kinds of device (cpu, cuda), one object per kind: `base.Backend` says
what each must provide, `cpu` and `cuda` provide it, and `registry.backend_for` finds a kind's by
`torch.device.type` (a `Runtime` carries its own: `runtime.backend`). Nothing outside this
package asks "is this cuda?".

This package's own module imports nothing: `names`, the kinds' names, is read without torch
(by the report, which reads run folders and never computes).
"""
