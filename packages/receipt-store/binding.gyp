# The same build as scripts/build-native.cjs (the `install` script), for people
# who prefer node-gyp. node-gyp needs the full Node development tree, e.g.
#   npx node-gyp rebuild --nodedir=/usr
# The install script needs only a C compiler and the Node-API headers (see README).
{
  "targets": [
    {
      "target_name": "receipt_store",
      "sources": ["native/receipt_store.c"],
      "include_dirs": ["<!(node -p \"require('node-api-headers').include_dir\")"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
