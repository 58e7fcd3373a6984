"""Generated stubs of loaderd.v1 (proto/loaderd/v1/loader.proto); regenerate with python/protogen.sh."""
