"""torch.fx.experimental (names only: gpumemnet does not trace)."""
