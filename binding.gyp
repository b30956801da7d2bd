{
  "targets": [
    {
      "target_name": "cordon",
      "sources": ["native/binding.cc"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra"],
      "conditions": [
        ["OS=='linux'", {"sources": [
          "native/posix/control.cc", "native/posix/spawn.cc", "native/posix/warm.cc", "native/posix/procargs.cc",
          "native/linux/proc.cc", "native/linux/descendants.cc", "native/linux/pinned_signal.cc", "native/linux/cgroup.cc", "native/linux/clone.cc", "native/linux/kernel.cc", "native/linux/confine.cc",
          "native/posix/tree_marker.cc", "native/linux/lost_tree.cc"
        ]}],
        ["OS=='mac'", {
          "sources": ["native/posix/control.cc", "native/posix/spawn.cc", "native/posix/warm.cc", "native/posix/procargs.cc", "native/darwin/tree.cc"],
          "xcode_settings": {"CLANG_CXX_LANGUAGE_STANDARD": "c++17", "MACOSX_DEPLOYMENT_TARGET": "11.0"}
        }],
        ["OS=='win'", {
          "sources": ["native/win/host.cc", "native/win/job_object.cc"],
          "defines": ["UNICODE", "_UNICODE", "_WIN32_WINNT=0x0A00"],
          "libraries": ["advapi32.lib"],
          "msvs_settings": {"VCCLCompilerTool": {"AdditionalOptions": ["/std:c++17"]}}
        }]
      ]
    },
    {
      "target_name": "cordon-anchor",
      "type": "executable",
      "cflags_cc": ["-std=c++17", "-Wall", "-Wextra"],
      "sources": ["native/protocol.cc"],
      "conditions": [
        ["OS=='linux' or OS=='mac'", {
          "sources": [
            "native/posix/anchor.cc", "native/posix/anchor_args.cc", "native/posix/warm.cc", "native/posix/command_child.cc", "native/posix/pty_relay.cc", "native/posix/lease.cc", "native/posix/tier.cc", "native/posix/tier_subreaper.cc",
            "native/posix/tier_cgroup.cc", "native/posix/cgroup_limits.cc", "native/posix/tier_process_group.cc",
            "native/posix/tree_marker.cc", "native/posix/known_members.cc", "native/posix/procargs.cc"
          ]
        }],
        ["OS=='linux'", {
          "sources": [
            "native/linux/proc.cc", "native/linux/descendants.cc", "native/linux/pinned_signal.cc", "native/linux/cgroup.cc", "native/linux/clone.cc", "native/linux/kernel.cc", "native/linux/confine.cc"
          ],
          "ldflags": ["<!@(node -p \"process.env.CORDON_ANCHOR_DYNAMIC ? '' : '-static'\")"]
        }],
        ["OS=='mac'", {
          "sources": ["native/darwin/tree.cc", "native/darwin/confine.cc"],
          "xcode_settings": {"CLANG_CXX_LANGUAGE_STANDARD": "c++17", "MACOSX_DEPLOYMENT_TARGET": "11.0"}
        }],
        ["OS=='win'", {
          "sources": [
            "native/win/anchor.cc", "native/win/channel.cc", "native/win/control.cc", "native/win/job.cc", "native/win/launch.cc",
            "native/win/lease.cc", "native/win/lease_job.cc", "native/win/pty.cc", "native/win/relay.cc", "native/win/released.cc", "native/win/warm.cc", "native/win/job_object.cc"
          ],
          "defines": ["UNICODE", "_UNICODE", "_WIN32_WINNT=0x0A00"],
          "libraries": ["shell32.lib", "advapi32.lib", "user32.lib"],
          "msvs_settings": {"VCCLCompilerTool": {"AdditionalOptions": ["/std:c++17"]}}
        }]
      ]
    }
  ]
}
