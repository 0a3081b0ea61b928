"""ONNX -> graph -> tensor programs -> accelerator Programs (and CPU/GPU code). Not yet built."""
