"""What differs between kinds of device (cpu, cuda), one `base.Backend` per kind, found by
`registry.backend_for(torch.device.type)`: nothing outside this package asks "is this cuda?".
Imports nothing, so that `names` is read without torch (by the report)."""
