"""torch.onnx.symbolic_opset11: the exporter's opset-11 symbolics. Imported by code that registers its own
symbolics (torchvision); gpumemnet exports nothing, so nothing here is ever called."""
