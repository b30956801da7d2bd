// The anchor's command line: a cold anchor's (`... -- PATH ARGV0 [ARGS...]`,
// which a warm anchor's LAUNCH repeats) and a warm anchor's own (warm.h).
// A bad one is reported on stderr with the synopsis (exit kUsageExit).
#pragma once

#include "../protocol.h"

namespace cordon {
namespace anchor {

using Options = protocol::Options<char>;

[[noreturn]] void usage(const char* why);

Options parse_args(int argc, char** argv);

// `--warm` and what it takes: --tier, --fallback, --best-effort, --trace.
Options parse_warm_args(int argc, char** argv);

}  // namespace anchor
}  // namespace cordon
