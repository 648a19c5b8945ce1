"""Model facts (load, validate, describe an ONNX file) and the inputs it runs on."""
