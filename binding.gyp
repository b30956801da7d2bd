{
  "targets": [
    {
      "target_name": "cordon",
      "sources": ["native/binding.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra"],
      "conditions": [
        ["OS=='linux'", {"sources": ["native/posix/control.cc", "native/linux/tree.cc"]}],
        ["OS=='mac'", {
          "sources": ["native/posix/control.cc", "native/darwin/tree.cc"],
          "xcode_settings": {"CLANG_CXX_LANGUAGE_STANDARD": "c++17", "MACOSX_DEPLOYMENT_TARGET": "11.0"}
        }]
      ]
    },
    {
      "target_name": "cordon-anchor",
      "type": "executable",
      "sources": ["native/posix/anchor.cc"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra"],
      "conditions": [
        ["OS=='linux'", {"sources": ["native/linux/tree.cc"]}],
        ["OS=='mac'", {
          "sources": ["native/darwin/tree.cc"],
          "xcode_settings": {"CLANG_CXX_LANGUAGE_STANDARD": "c++17", "MACOSX_DEPLOYMENT_TARGET": "11.0"}
        }]
      ]
    }
  ]
}
