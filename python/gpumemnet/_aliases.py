"""torch.* names that are other layers' functions under a second name (torch.conv2d is F.conv2d, torch.eq ...) and
torch's module-level constants and queries (torch.inf, torch.is_autocast_enabled ...): the package's face (layer 4)
imports __all__."""

__all__ = []
