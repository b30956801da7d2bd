// The only file that includes napi.h: flat functions over the native contract
// (cordon.h). Owners, kinds, graces, drains and policies live in TypeScript.
#include <napi.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cordon.h"
#ifndef _WIN32
#include "posix/procargs.h"
#endif
#if CORDON_LINUX_PROC
#include "linux/lost_tree.h"
#endif
#ifdef __APPLE__
#include <crt_externs.h>  // a loadable bundle has no `environ` of its own: _NSGetEnviron()
#elif !defined(_WIN32)
extern char** environ;
#endif

namespace {

const char* errno_name(int err) {
  switch (err) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ESRCH: return "ESRCH";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case EAGAIN: return "EAGAIN";
    case ENOMEM: return "ENOMEM";
    case ENOTDIR: return "ENOTDIR";
    case EEXIST: return "EEXIST";
    case EBADF: return "EBADF";
    case EBUSY: return "EBUSY";
    case ECHILD: return "ECHILD";
    case ENOEXEC: return "ENOEXEC";
    case ELOOP: return "ELOOP";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case E2BIG: return "E2BIG";
    case ETIMEDOUT: return "ETIMEDOUT";
    case ECONNREFUSED: return "ECONNREFUSED";
    default: return "EIO";
  }
}

Napi::Value Fail(Napi::Env env, int rc, const char* syscall) {
  int err = rc < 0 ? -rc : rc;
  std::string message = std::string(syscall) + " failed: " + strerror(err);
  Napi::Error error = Napi::Error::New(env, message);
  error.Set("code", Napi::String::New(env, errno_name(err)));
  error.Set("errno", Napi::Number::New(env, -err));
  error.Set("syscall", Napi::String::New(env, syscall));
  error.ThrowAsJavaScriptException();
  return env.Undefined();
}

Napi::Value Probe(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  cordon::Probe p;
  int rc = cordon::probe(p);
  if (rc < 0) return Fail(env, rc, "probe");
  Napi::Object out = Napi::Object::New(env);
  out.Set("pidfd", Napi::Boolean::New(env, p.pidfd));
  out.Set("subreaper", Napi::Boolean::New(env, p.subreaper));
  out.Set("procScan", Napi::Boolean::New(env, p.proc_scan));
  out.Set("jobObjects", Napi::Boolean::New(env, p.job_objects));
  out.Set("ctrlBreak", Napi::Boolean::New(env, p.ctrl_break));
  out.Set("wine", Napi::Boolean::New(env, p.wine));
  if (p.xnu) out.Set("xnu", Napi::Boolean::New(env, true));
  if (p.pseudo_console) out.Set("pseudoConsole", Napi::Boolean::New(env, true));
  if (p.page_size > 0) out.Set("pageSize", Napi::Number::New(env, static_cast<double>(p.page_size)));
  if (p.arg_max > 0) out.Set("argMax", Napi::Number::New(env, static_cast<double>(p.arg_max)));
  out.Set("landlock", Napi::Number::New(env, p.landlock_abi));
#if CORDON_LINUX_PROC
  out.Set("cgroup", Napi::Boolean::New(env, cordon::cgroup_available()));
#else
  out.Set("cgroup", Napi::Boolean::New(env, false));
#endif
  return out;
}

#ifndef _WIN32
bool StringArray(const Napi::Value& v, std::vector<std::string>& out) {
  if (!v.IsArray()) return false;
  Napi::Array a = v.As<Napi::Array>();
  out.reserve(a.Length());
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value e = a.Get(i);
    if (!e.IsString()) return false;
    out.push_back(e.As<Napi::String>().Utf8Value());
  }
  return true;
}

// The host process's own environment, as the C library holds it: what
// process.env reads and writes on Node's main thread (setenv, unsetenv).
char** host_environ() {
#ifdef __APPLE__
  return *_NSGetEnviron();
#else
  return environ;
#endif
}

// A command's environment: an array of "NAME=value", or null for the host's
// own (copied here: Object.entries(process.env) asks the C library for each
// variable in turn, about 2 us each, on every spawn).
bool EnvArray(const Napi::Value& v, std::vector<std::string>& out) {
  if (!v.IsNull()) return StringArray(v, out);
  for (char** e = host_environ(); e && *e; e++) out.emplace_back(*e);
  return true;
}

// environSize() -> [count, bytes, longestBytes, longestHead]: the host's own
// environment as one exec would carry it (bytes: every string with its NUL),
// and its longest string (its bytes, its name with the '=', or its first 20
// bytes where it has no name): what the host's E2BIG check needs
// (lib/anchor/exec-size.ts) without reading each variable through process.env.
Napi::Value EnvironSize(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  double count = 0, bytes = 0;
  size_t longest = 0;
  const char* longest_at = "";
  for (char** e = host_environ(); e && *e; e++) {
    size_t n = strlen(*e);
    count++;
    bytes += static_cast<double>(n + 1);
    if (n + 1 > longest) {
      longest = n + 1;
      longest_at = *e;
    }
  }
  const char* eq = strchr(longest_at, '=');
  size_t head = eq && eq != longest_at ? static_cast<size_t>(eq - longest_at) + 1 : std::min<size_t>(strlen(longest_at), 20);
  Napi::Array out = Napi::Array::New(env, 4);
  out.Set(0u, Napi::Number::New(env, count));
  out.Set(1u, Napi::Number::New(env, bytes));
  out.Set(2u, Napi::Number::New(env, static_cast<double>(longest)));
  out.Set(3u, Napi::String::New(env, longest_at, head));
  return out;
}

// spawnAnchor(path, argv, env, [stdin, stdout, stderr])
//   -> { pid, control, fds: [stdin, stdout, stderr] }; stdio entries: -1 a
//   pipe, -2 /dev/null, else a host descriptor; control: the host's end of the
//   control channel; fds: the host's pipe ends, -1 if none. Every descriptor
//   is made here, so none needs closing by the caller when it throws.
// The arguments of spawnAnchor (and spawnWarmAnchor): false after throwing a TypeError.
bool SpawnArgs(const Napi::CallbackInfo& info, cordon::AnchorSpawn& spec, const char* usage) {
  Napi::Env env = info.Env();
  bool ok = info.Length() >= 4 && info[0].IsString() && StringArray(info[1], spec.argv) &&
            EnvArray(info[2], spec.env) && info[3].IsArray() &&
            info[3].As<Napi::Array>().Length() == 3;
  if (ok) {
    Napi::Array stdio = info[3].As<Napi::Array>();
    for (uint32_t i = 0; i < 3; i++) {
      Napi::Value e = stdio.Get(i);
      if (!e.IsNumber()) ok = false;
      else spec.stdio[i] = e.As<Napi::Number>().Int32Value();
    }
  }
  if (!ok) {
    Napi::TypeError::New(env, usage).ThrowAsJavaScriptException();
    return false;
  }
  spec.path = info[0].As<Napi::String>().Utf8Value();
  return true;
}

Napi::Object Spawned(Napi::Env env, const cordon::AnchorProcess& proc) {
  Napi::Object out = Napi::Object::New(env);
  out.Set("pid", Napi::Number::New(env, static_cast<double>(proc.pid)));
  out.Set("control", Napi::Number::New(env, proc.control_fd));
  Napi::Array fds = Napi::Array::New(env, 3);
  for (uint32_t i = 0; i < 3; i++) fds.Set(i, Napi::Number::New(env, proc.host_fds[i]));
  out.Set("fds", fds);
  return out;
}

Napi::Value SpawnAnchor(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  cordon::AnchorSpawn spec;
  if (!SpawnArgs(info, spec, "spawnAnchor(path, argv[], env[], stdio[3])")) return env.Undefined();
  // A fifth argument, a number: the tree is leased; its log's descriptor (-1: none).
  if (info.Length() >= 5 && info[4].IsNumber()) {
    spec.lease = true;
    spec.lease_log = info[4].As<Napi::Number>().Int32Value();
  }
  cordon::AnchorProcess proc;
  int rc = cordon::spawn_anchor(spec, proc);
  if (rc < 0) return Fail(env, rc, "posix_spawn");
  return Spawned(env, proc);
}

// spawnWarmAnchor(path, argv, env, stdio, callback(err, spawned)): as
// spawnAnchor, on a thread of libuv's pool: the host's JS thread does not
// wait for the anchor's exec (a warm anchor is started while a command runs).
class WarmSpawn : public Napi::AsyncWorker {
 public:
  WarmSpawn(Napi::Function callback, cordon::AnchorSpawn spec) : Napi::AsyncWorker(callback), spec_(std::move(spec)) {}
  void Execute() override { rc_ = cordon::spawn_anchor(spec_, proc_); }
  void OnOK() override {
    Napi::Env env = Env();
    if (rc_ < 0) {
      Napi::Error e = Napi::Error::New(env, std::string("posix_spawn: ") + strerror(-rc_));
      e.Set("code", Napi::String::New(env, errno_name(-rc_)));
      Callback().Call({e.Value(), env.Undefined()});
      return;
    }
    Callback().Call({env.Null(), Spawned(env, proc_)});
  }

 private:
  cordon::AnchorSpawn spec_;
  cordon::AnchorProcess proc_;
  int rc_ = 0;
};

Napi::Value SpawnWarmAnchor(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  cordon::AnchorSpawn spec;
  if (!SpawnArgs(info, spec, "spawnWarmAnchor(path, argv[], env[], stdio[3], callback)")) return env.Undefined();
  if (info.Length() < 5 || !info[4].IsFunction()) {
    Napi::TypeError::New(env, "spawnWarmAnchor(path, argv[], env[], stdio[3], callback)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  (new WarmSpawn(info[4].As<Napi::Function>(), std::move(spec)))->Queue();
  return env.Undefined();
}

// launchWarm(control, args, env, [stdin, stdout, stderr]) -> [stdin, stdout,
//   stderr]: hands a warm anchor (control: the host's end of its channel)
//   its command; stdio entries as spawnAnchor's; returns the host's pipe
//   ends (-1 if none). Throws with the errno when nothing usable was sent.
Napi::Value LaunchWarm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<std::string> args, vars;
  int stdio[3] = {0, 0, 0};
  bool ok = info.Length() >= 4 && info[0].IsNumber() && StringArray(info[1], args) && EnvArray(info[2], vars) &&
            info[3].IsArray() && info[3].As<Napi::Array>().Length() == 3;
  for (uint32_t i = 0; ok && i < 3; i++) {
    Napi::Value e = info[3].As<Napi::Array>().Get(i);
    if (!e.IsNumber()) ok = false;
    else stdio[i] = e.As<Napi::Number>().Int32Value();
  }
  if (!ok) {
    Napi::TypeError::New(env, "launchWarm(control, args[], env[], stdio[3])").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int fds[3];
  int rc = cordon::launch_warm(info[0].As<Napi::Number>().Int32Value(), args, vars, stdio, fds);
  if (rc < 0) return Fail(env, rc, "sendmsg");
  Napi::Array out = Napi::Array::New(env, 3);
  for (uint32_t i = 0; i < 3; i++) out.Set(i, Napi::Number::New(env, fds[i]));
  return out;
}

// leaseRequest(endpoint, line, timeoutMs) -> { fd, received, fds }: connects
// to a leased anchor's endpoint, writes `line`, reads the first answer line
// with the descriptors it carries. `fd`: the connection (-1 if the anchor
// closed it), `received`: what was read (the answer line and what followed).
Napi::Value LeaseRequest(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[1].IsString() || !info[2].IsNumber()) {
    Napi::TypeError::New(env, "leaseRequest(endpoint, line, timeoutMs)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int sock = -1;
  std::string received;
  std::vector<int> fds;
  int rc = cordon::lease_request(info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::String>().Utf8Value(),
                                 info[2].As<Napi::Number>().Int32Value(), sock, received, fds);
  if (rc < 0) return Fail(env, rc, "connect");
  Napi::Object out = Napi::Object::New(env);
  out.Set("fd", Napi::Number::New(env, sock));
  out.Set("received", Napi::String::New(env, received));
  Napi::Array list = Napi::Array::New(env, fds.size());
  for (uint32_t i = 0; i < fds.size(); i++) list.Set(i, Napi::Number::New(env, fds[i]));
  out.Set("fds", list);
  return out;
}

// reapAnchor(pid, keep?) -> null while it runs, else { code, signal } (-1 / 0
// when not applicable; both -1 when someone else reaped it). With keep: its
// exit, read without reaping it (it stays a zombie until reapAnchor(pid)).
Napi::Value ReapAnchor(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "reapAnchor(pid) takes a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int code = -1, signal = 0;
  bool keep = info.Length() > 1 && info[1].IsBoolean() && info[1].As<Napi::Boolean>().Value();
  int rc = cordon::reap_anchor(info[0].As<Napi::Number>().Int64Value(), code, signal, keep);
  if (rc == 0) return env.Null();
  if (rc == -ECHILD) code = -1, signal = -1;
  else if (rc < 0) return Fail(env, rc, "waitpid");
  Napi::Object out = Napi::Object::New(env);
  out.Set("code", Napi::Number::New(env, code));
  out.Set("signal", Napi::Number::New(env, signal));
  return out;
}

#if CORDON_LINUX_PROC
// sweepLostTree(token, session, since) -> { killed: pid[], unreached: pid[],
// rounds, elapsedMs }: the host's sweep of a tree whose anchor died
// (linux/lost_tree.h). Throws ENOSYS without pidfds.
Napi::Value SweepLostTree(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[1].IsNumber() || !info[2].IsNumber()) {
    Napi::TypeError::New(env, "sweepLostTree(token, session, since) takes a string and two numbers").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  cordon::LostSweep sweep;
  int rc = cordon::sweep_lost_tree(info[0].As<Napi::String>().Utf8Value(), info[1].As<Napi::Number>().Int64Value(),
                                   static_cast<uint64_t>(info[2].As<Napi::Number>().Int64Value()), 64, 1000, sweep);
  if (rc < 0) return Fail(env, rc, "sweep");
  auto list = [&](const std::vector<int64_t>& pids) {
    Napi::Array a = Napi::Array::New(env, pids.size());
    for (size_t i = 0; i < pids.size(); i++) a.Set(static_cast<uint32_t>(i), Napi::Number::New(env, static_cast<double>(pids[i])));
    return a;
  };
  Napi::Object out = Napi::Object::New(env);
  out.Set("killed", list(sweep.killed));
  out.Set("unreached", list(sweep.unreached));
  out.Set("rounds", Napi::Number::New(env, sweep.rounds));
  out.Set("elapsedMs", Napi::Number::New(env, static_cast<double>(sweep.elapsed_ms)));
  return out;
}
#endif

// signalAnchor(pid, signal): signals the anchor only while it is an unreaped
// child of the host (its pid pinned). Throws ECHILD when it is not.
Napi::Value SignalAnchor(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) {
    Napi::TypeError::New(env, "signalAnchor(pid, signal) takes two numbers").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int64_t pid = info[0].As<Napi::Number>().Int64Value();
  int sig = info[1].As<Napi::Number>().Int32Value();
  if (pid <= 0 || sig <= 0) {
    Napi::RangeError::New(env, "signalAnchor(pid, signal): pid and signal must be positive").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int rc = cordon::signal_anchor(pid, sig);
  if (rc < 0) return Fail(env, rc, "kill");
  return env.Undefined();
}
#endif

// processStart(pid) -> the process's start stamp as a decimal string ("0": gone).
// (Windows: its creation time, a FILETIME; "0" also once it exited.)
Napi::Value ProcessStart(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "processStart(pid) takes a number").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::String::New(env, std::to_string(cordon::start_time_of(info[0].As<Napi::Number>().Int64Value())));
}

// listTree(anchorPid, groupId): the live members as the OS sees them now.
Napi::Value ListTree(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) {
    Napi::TypeError::New(env, "listTree(anchorPid, groupId) takes two numbers")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int64_t anchor = info[0].As<Napi::Number>().Int64Value();
  int64_t group = info[1].As<Napi::Number>().Int64Value();
  std::vector<cordon::Member> members;
  int rc = cordon::list_tree(anchor, group, {}, members);
  if (rc < 0) return Fail(env, rc, "list_tree");
  Napi::Array out = Napi::Array::New(env, members.size());
  for (size_t i = 0; i < members.size(); i++) {
    const cordon::Member& m = members[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("pid", Napi::Number::New(env, static_cast<double>(m.pid)));
    o.Set("ppid", Napi::Number::New(env, static_cast<double>(m.ppid)));
    o.Set("pgid", Napi::Number::New(env, static_cast<double>(m.pgid)));
    o.Set("state", Napi::String::New(env, std::string(1, m.state)));
    o.Set("command", Napi::String::New(env, m.command));
    out.Set(static_cast<uint32_t>(i), o);
  }
  return out;
}

Napi::Value CountOpenFds(const Napi::CallbackInfo& info) {
  int n = cordon::count_open_fds();
  if (n < 0) return Fail(info.Env(), n, "opendir");
  return Napi::Number::New(info.Env(), n);
}

#ifndef _WIN32
// parseProcargs2(buffer, { pointerSize, self, capacity }?): a kern.procargs2
// buffer as the process-group tier reads it on macOS (posix/procargs.h).
// Internal: for tests, which feed it synthetic buffers on every POSIX host.
Napi::Value ParseProcargs2(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsBuffer()) {
    Napi::TypeError::New(env, "parseProcargs2(buffer, hints?) takes a Buffer").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Buffer<char> data = info[0].As<Napi::Buffer<char>>();
  cordon::ProcArgsHints hints;
  if (info.Length() > 1 && info[1].IsObject()) {
    Napi::Object h = info[1].As<Napi::Object>();
    if (h.Get("pointerSize").IsNumber()) hints.pointer_size = h.Get("pointerSize").As<Napi::Number>().Uint32Value();
    if (h.Get("self").IsBoolean()) hints.self = h.Get("self").As<Napi::Boolean>().Value();
    if (h.Get("capacity").IsNumber()) hints.capacity = h.Get("capacity").As<Napi::Number>().Uint32Value();
  }
  cordon::ProcArgs parsed = cordon::parse_procargs2(data.Data(), data.Length(), hints);
  Napi::Object out = Napi::Object::New(env);
  out.Set("valid", Napi::Boolean::New(env, parsed.valid));
  out.Set("argc", Napi::Number::New(env, parsed.argc));
  out.Set("execPath", Napi::String::New(env, parsed.exec_path));
  Napi::Array argv = Napi::Array::New(env, parsed.argv.size());
  for (size_t i = 0; i < parsed.argv.size(); i++) argv.Set(static_cast<uint32_t>(i), Napi::String::New(env, parsed.argv[i]));
  out.Set("argv", argv);
  out.Set("argvComplete", Napi::Boolean::New(env, parsed.argv_complete));
  out.Set("zeroFilled", Napi::Boolean::New(env, parsed.zero_filled));
  Napi::Array vars = Napi::Array::New(env, parsed.env_count);
  uint32_t n = 0;
  for (size_t at = 0; at < parsed.env.size() && n < parsed.env_count;) {
    size_t stop = parsed.env.find('\0', at);
    if (stop == std::string::npos) stop = parsed.env.size();
    vars.Set(n++, Napi::String::New(env, parsed.env.data() + at, stop - at));
    at = stop + 1;
  }
  out.Set("env", vars);
  const char* verdict = parsed.verdict == cordon::ProcEnv::kPresent ? "present"
                        : parsed.verdict == cordon::ProcEnv::kWithheld ? "withheld"
                                                                        : "empty";
  out.Set("verdict", Napi::String::New(env, verdict));
  out.Set("cut", Napi::Boolean::New(env, parsed.cut));
  return out;
}
#endif

#ifdef _WIN32
// Windows only: the host's handle on each tree's Job Object (native/win/host.cc).
// Handles cross as numbers (handle values are small integers).
uint64_t HandleArg(const Napi::CallbackInfo& info, size_t i) {
  return static_cast<uint64_t>(info[i].As<Napi::Number>().Int64Value());
}

bool NumberArgs(const Napi::CallbackInfo& info, size_t n, const char* usage) {
  for (size_t i = 0; i < n; i++) {
    if (info.Length() <= i || !info[i].IsNumber()) {
      Napi::TypeError::New(info.Env(), usage).ThrowAsJavaScriptException();
      return false;
    }
  }
  return true;
}

// jobCreate() -> { handle }: an unnamed job with kill-on-close, no breakaway.
Napi::Value JobCreate(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint64_t handle = 0;
  int rc = cordon::job_create(handle);
  if (rc < 0) return Fail(env, rc, "CreateJobObject");
  Napi::Object out = Napi::Object::New(env);
  out.Set("handle", Napi::Number::New(env, static_cast<double>(handle)));
  return out;
}

// jobAttach(handle, anchorPid) -> the job's handle value inside the anchor.
Napi::Value JobAttach(const Napi::CallbackInfo& info) {
  if (!NumberArgs(info, 2, "jobAttach(handle, anchorPid) takes two numbers")) return info.Env().Undefined();
  uint64_t remote = 0;
  int rc = cordon::job_attach(HandleArg(info, 0), info[1].As<Napi::Number>().Int64Value(), remote);
  if (rc < 0) return Fail(info.Env(), rc, "DuplicateHandle");
  return Napi::Number::New(info.Env(), static_cast<double>(remote));
}

Napi::Value JobTerminate(const Napi::CallbackInfo& info) {
  if (!NumberArgs(info, 1, "jobTerminate(handle) takes a number")) return info.Env().Undefined();
  int rc = cordon::job_terminate(HandleArg(info, 0), 1);
  if (rc < 0) return Fail(info.Env(), rc, "TerminateJobObject");
  return info.Env().Undefined();
}

Napi::Value JobActive(const Napi::CallbackInfo& info) {
  if (!NumberArgs(info, 1, "jobActive(handle) takes a number")) return info.Env().Undefined();
  int n = cordon::job_active_count(HandleArg(info, 0));
  if (n < 0) return Fail(info.Env(), n, "QueryInformationJobObject");
  return Napi::Number::New(info.Env(), n);
}

// makePrivateDir(path): a directory only this user may use (its DACL); throws EEXIST if it exists.
Napi::Value MakePrivateDir(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "makePrivateDir(path) takes a string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int rc = cordon::make_private_dir(info[0].As<Napi::String>().Utf8Value());
  if (rc < 0) return Fail(env, rc, "CreateDirectory");
  return env.Undefined();
}

// privateDirFacts(path) -> { directory, reparse, owner, dacl: [{ allow, sid }] | null }:
// the directory's own security, its last component not followed.
Napi::Value PrivateDirFacts(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "privateDirFacts(path) takes a string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  cordon::DirSecurity facts;
  int rc = cordon::read_dir_security(info[0].As<Napi::String>().Utf8Value(), facts);
  if (rc < 0) return Fail(env, rc, "GetSecurityInfo");
  Napi::Object out = Napi::Object::New(env);
  out.Set("directory", Napi::Boolean::New(env, facts.directory));
  out.Set("reparse", Napi::Boolean::New(env, facts.reparse));
  out.Set("owner", Napi::String::New(env, facts.owner));
  if (facts.dacl_present) {
    Napi::Array aces = Napi::Array::New(env, facts.aces.size());
    for (size_t i = 0; i < facts.aces.size(); i++) {
      Napi::Object ace = Napi::Object::New(env);
      ace.Set("allow", Napi::Boolean::New(env, facts.aces[i].allow));
      ace.Set("sid", Napi::String::New(env, facts.aces[i].sid));
      aces.Set(static_cast<uint32_t>(i), ace);
    }
    out.Set("dacl", aces);
  } else {
    out.Set("dacl", env.Null());
  }
  return out;
}

// openPipeClient(name) -> { fd, serverPid }: a client connection to the named
// pipe, opened before anything is written (identification level only: the
// server cannot impersonate this process), as a descriptor of Node's own C
// runtime (net.Socket({ fd }) takes it), with the pid of the process that
// serves it. EBUSY: every instance is busy; ENOENT: no such pipe.
Napi::Value OpenPipeClient(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "openPipeClient(name) takes a string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int fd = -1;
  uint32_t pid = 0;
  int rc = cordon::open_pipe_client(info[0].As<Napi::String>().Utf8Value(), fd, pid);
  if (rc < 0) return Fail(env, rc, "CreateFile");
  Napi::Object out = Napi::Object::New(env);
  out.Set("fd", Napi::Number::New(env, fd));
  out.Set("serverPid", Napi::Number::New(env, pid));
  return out;
}

// ownJob() -> { inJob, limitFlags }: the Job Object this process runs in
// (limitFlags: its LimitFlags; null when they could not be read).
Napi::Value OwnJob(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  bool in_job = false, read = false;
  uint32_t flags = 0;
  int rc = cordon::own_job(in_job, read, flags);
  if (rc < 0) return Fail(env, rc, "IsProcessInJob");
  Napi::Object out = Napi::Object::New(env);
  out.Set("inJob", Napi::Boolean::New(env, in_job));
  out.Set("limitFlags", read ? Napi::Value(Napi::Number::New(env, flags)) : env.Null());
  return out;
}

// warmStdio(anchorPid, [mode x3]) -> { handles: [3 numbers], fds: [3 numbers] }:
// a warm anchor's stdio (native/cordon.h warm_stdio; mode 0 pipe, 1 ignore, 2 inherit).
Napi::Value WarmStdio(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsArray() || info[1].As<Napi::Array>().Length() != 3) {
    Napi::TypeError::New(env, "warmStdio(anchorPid, modes) takes a number and three modes").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array list = info[1].As<Napi::Array>();
  int modes[3];
  for (uint32_t i = 0; i < 3; i++) {
    Napi::Value m = list.Get(i);
    int v = m.IsNumber() ? m.As<Napi::Number>().Int32Value() : -1;
    if (v != cordon::kWarmPipe && v != cordon::kWarmIgnore && v != cordon::kWarmInherit) {
      Napi::TypeError::New(env, "warmStdio: a mode is 0 (pipe), 1 (ignore) or 2 (inherit)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    modes[i] = v;
  }
  uint64_t remote[3];
  int fds[3];
  int rc = cordon::warm_stdio(info[0].As<Napi::Number>().Int64Value(), modes, remote, fds);
  Napi::Array handles = Napi::Array::New(env, 3);
  Napi::Array descriptors = Napi::Array::New(env, 3);
  for (uint32_t i = 0; i < 3; i++) {
    handles.Set(i, Napi::Number::New(env, static_cast<double>(remote[i])));
    descriptors.Set(i, Napi::Number::New(env, fds[i]));
  }
  if (rc < 0) {
    // (The descriptors made before the failure: the caller closes them.)
    Napi::Error e = Napi::Error::New(env, "warm anchor stdio failed");
    e.Set("errno", Napi::Number::New(env, -rc));
    e.Set("fds", descriptors);
    e.ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Object out = Napi::Object::New(env);
  out.Set("handles", handles);
  out.Set("fds", descriptors);
  return out;
}

// hostIdentity() -> string: what a warm anchor started now would take from the host (native/cordon.h host_identity).
Napi::Value HostIdentity(const Napi::CallbackInfo& info) {
  std::string id;
  int rc = cordon::host_identity(id);
  if (rc < 0) return Fail(info.Env(), rc, "GetTokenInformation");
  return Napi::String::New(info.Env(), id);
}

Napi::Value JobClose(const Napi::CallbackInfo& info) {
  if (!NumberArgs(info, 1, "jobClose(handle) takes a number")) return info.Env().Undefined();
  int rc = cordon::job_close(HandleArg(info, 0));
  if (rc < 0) return Fail(info.Env(), rc, "CloseHandle");
  return info.Env().Undefined();
}
#endif

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("probe", Napi::Function::New(env, Probe, "probe"));
  exports.Set("listTree", Napi::Function::New(env, ListTree, "listTree"));
  exports.Set("countOpenFds", Napi::Function::New(env, CountOpenFds, "countOpenFds"));
#ifndef _WIN32
  exports.Set("spawnAnchor", Napi::Function::New(env, SpawnAnchor, "spawnAnchor"));
  exports.Set("spawnWarmAnchor", Napi::Function::New(env, SpawnWarmAnchor, "spawnWarmAnchor"));
  exports.Set("launchWarm", Napi::Function::New(env, LaunchWarm, "launchWarm"));
  exports.Set("environSize", Napi::Function::New(env, EnvironSize, "environSize"));
  exports.Set("reapAnchor", Napi::Function::New(env, ReapAnchor, "reapAnchor"));
  exports.Set("signalAnchor", Napi::Function::New(env, SignalAnchor, "signalAnchor"));
#if CORDON_LINUX_PROC
  exports.Set("sweepLostTree", Napi::Function::New(env, SweepLostTree, "sweepLostTree"));
#endif
  exports.Set("leaseRequest", Napi::Function::New(env, LeaseRequest, "leaseRequest"));
  exports.Set("parseProcargs2", Napi::Function::New(env, ParseProcargs2, "parseProcargs2"));
#endif
  exports.Set("processStart", Napi::Function::New(env, ProcessStart, "processStart"));
#ifdef _WIN32
  exports.Set("jobCreate", Napi::Function::New(env, JobCreate, "jobCreate"));
  exports.Set("jobAttach", Napi::Function::New(env, JobAttach, "jobAttach"));
  exports.Set("jobTerminate", Napi::Function::New(env, JobTerminate, "jobTerminate"));
  exports.Set("jobActive", Napi::Function::New(env, JobActive, "jobActive"));
  exports.Set("jobClose", Napi::Function::New(env, JobClose, "jobClose"));
  exports.Set("makePrivateDir", Napi::Function::New(env, MakePrivateDir, "makePrivateDir"));
  exports.Set("ownJob", Napi::Function::New(env, OwnJob, "ownJob"));
  exports.Set("privateDirFacts", Napi::Function::New(env, PrivateDirFacts, "privateDirFacts"));
  exports.Set("openPipeClient", Napi::Function::New(env, OpenPipeClient, "openPipeClient"));
  exports.Set("warmStdio", Napi::Function::New(env, WarmStdio, "warmStdio"));
  exports.Set("hostIdentity", Napi::Function::New(env, HostIdentity, "hostIdentity"));
#endif
  return exports;
}

}  // namespace

NODE_API_MODULE(cordon, Init)
