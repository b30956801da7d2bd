// The XNU interfaces cordon's darwin code calls (native/darwin/tree.cc), as
// the model of XNU's process table (test/xnu-model, docs/xnu-model.md)
// answers them on Linux. Test code: nothing here ships.
//
// Constants have XNU's values (bsd/sys/proc_info.h, bsd/sys/proc.h,
// bsd/sys/sysctl.h, bsd/sys/event.h of xnu-11417); structures carry the
// fields by XNU's names, in XNU's order where the darwin code depends on a
// size (proc_bsdinfo, proc_fdinfo), and only the fields it reads elsewhere:
// the darwin code, the shim (shim.cc) and the model's kernel (kernel.cc) are
// compiled together, so only their agreement matters.
#pragma once

#include <stdint.h>
#include <sys/time.h>
#include <time.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MAXCOMLEN 16
#ifndef MAXPATHLEN
#define MAXPATHLEN 1024
#endif

// ---- bsd/sys/proc.h: p_stat values and p_flag bits
#define SIDL 1
#define SRUN 2
#define SSLEEP 3
#define SSTOP 4
#define SZOMB 5
#define P_TRACED 0x00000800
#define P_WEXIT 0x00002000

// ---- bsd/sys/proc_info.h
#define PROC_ALL_PIDS 1
#define PROC_PGRP_ONLY 2
#define PROC_TTY_ONLY 3
#define PROC_UID_ONLY 4
#define PROC_RUID_ONLY 5
#define PROC_PPID_ONLY 6

#define PROC_PIDLISTFDS 1
#define PROC_PIDTASKALLINFO 2
#define PROC_PIDTBSDINFO 3
#define PROC_PIDPATHINFO 11
#define PROC_PIDPATHINFO_MAXSIZE (4 * MAXPATHLEN)
#define PROC_PIDT_SHORTBSDINFO 13
// (bsd/sys/proc_info_private.h)
#define PROC_PIDUNIQIDENTIFIERINFO 17
#define PROC_PIDT_BSDINFOWITHUNIQID 18

#define PROC_PIDFDVNODEINFO 1
#define PROC_PIDFDSOCKETINFO 3
#define PROC_PIDFDPIPEINFO 6

#define PROX_FDTYPE_VNODE 1
#define PROX_FDTYPE_SOCKET 2
#define PROX_FDTYPE_PSHM 3
#define PROX_FDTYPE_PSEM 4
#define PROX_FDTYPE_KQUEUE 5
#define PROX_FDTYPE_PIPE 6
#define PROX_FDTYPE_FSEVENTS 7

#define PROC_FLAG_SYSTEM 1
#define PROC_FLAG_TRACED 2
#define PROC_FLAG_INEXIT 4
#define PROC_FLAG_SLEADER 0x20
#define PROC_FLAG_CTTY 0x40

struct proc_bsdinfo {
  uint32_t pbi_flags;
  uint32_t pbi_status;
  uint32_t pbi_xstatus;
  uint32_t pbi_pid;
  uint32_t pbi_ppid;
  uid_t pbi_uid;
  gid_t pbi_gid;
  uid_t pbi_ruid;
  gid_t pbi_rgid;
  uid_t pbi_svuid;
  gid_t pbi_svgid;
  uint32_t rfu_1;
  char pbi_comm[MAXCOMLEN];
  char pbi_name[2 * MAXCOMLEN];
  uint32_t pbi_nfiles;
  uint32_t pbi_pgid;
  uint32_t pbi_pjobc;
  uint32_t e_tdev;
  uint32_t e_tpgid;
  int32_t pbi_nice;
  uint64_t pbi_start_tvsec;
  uint64_t pbi_start_tvusec;
};

struct proc_taskinfo {
  uint64_t pti_virtual_size;
  uint64_t pti_resident_size;
  uint64_t pti_total_user;
  uint64_t pti_total_system;
  uint64_t pti_threads_user;
  uint64_t pti_threads_system;
  int32_t pti_policy;
  int32_t pti_faults;
  int32_t pti_pageins;
  int32_t pti_cow_faults;
  int32_t pti_messages_sent;
  int32_t pti_messages_received;
  int32_t pti_syscalls_mach;
  int32_t pti_syscalls_unix;
  int32_t pti_csw;
  int32_t pti_threadnum;
  int32_t pti_numrunning;
  int32_t pti_priority;
};

struct proc_taskallinfo {
  struct proc_bsdinfo pbsd;
  struct proc_taskinfo ptinfo;
};

struct proc_bsdshortinfo {
  uint32_t pbsi_pid;
  uint32_t pbsi_ppid;
  uint32_t pbsi_pgid;
  uint32_t pbsi_status;
  char pbsi_comm[MAXCOMLEN];
  uint32_t pbsi_flags;
  uid_t pbsi_uid;
  gid_t pbsi_gid;
  uid_t pbsi_ruid;
  gid_t pbsi_rgid;
  uid_t pbsi_svuid;
  gid_t pbsi_svgid;
  uint32_t pbsi_rfu;
};

// (bsd/sys/proc_info_private.h; p_orig_ppidversion since xnu-11417, before
// it a reserved field the kernel zeroes)
struct proc_uniqidentifierinfo {
  uint8_t p_uuid[16];
  uint64_t p_uniqueid;
  uint64_t p_puniqueid;
  int32_t p_idversion;
  int32_t p_orig_ppidversion;
  uint64_t p_reserve2;
  uint64_t p_reserve3;
};

struct proc_fdinfo {
  int32_t proc_fd;
  uint32_t proc_fdtype;
};

struct proc_fileinfo {
  uint32_t fi_openflags;
  uint32_t fi_status;
  int64_t fi_offset;
  int32_t fi_type;
  uint32_t fi_guardflags;
};

struct vinfo_stat {
  uint32_t vst_dev;
  uint16_t vst_mode;
  uint16_t vst_nlink;
  uint64_t vst_ino;
  uid_t vst_uid;
  gid_t vst_gid;
};

struct vnode_info {
  struct vinfo_stat vi_stat;
  int vi_type;
  int vi_pad;
};

struct vnode_fdinfo {
  struct proc_fileinfo pfi;
  struct vnode_info pvi;
};

struct socket_info {
  struct vinfo_stat soi_stat;
  uint64_t soi_so;
  uint64_t soi_pcb;
  int soi_type;
  int soi_protocol;
  int soi_family;
};

struct socket_fdinfo {
  struct proc_fileinfo pfi;
  struct socket_info psi;
};

struct pipe_info {
  struct vinfo_stat pipe_stat;
  uint64_t pipe_handle;
  uint64_t pipe_peerhandle;
  int pipe_status;
  int rfu_1;
};

struct pipe_fdinfo {
  struct proc_fileinfo pfi;
  struct pipe_info pipeinfo;
};

// ---- bsd/sys/sysctl.h
#define CTL_KERN 1
#define KERN_ARGMAX 8
#define KERN_PROC 14
#define KERN_PROC_PID 1
#define KERN_PROCARGS2 49

struct extern_proc {
  struct timeval p_starttime;  // (XNU: p_un.__p_starttime, through a macro)
  int p_flag;
  char p_stat;
  pid_t p_pid;
  char p_comm[MAXCOMLEN + 1];
};
struct _pcred {
  uid_t p_ruid;
  uid_t p_svuid;
  gid_t p_rgid;
  gid_t p_svgid;
};
#ifndef NGROUPS
#define NGROUPS 16
#endif
struct _ucred {
  uid_t cr_uid;
  short cr_ngroups;
  gid_t cr_groups[NGROUPS];  // [0]: the effective gid
};
struct eproc {
  struct _pcred e_pcred;
  struct _ucred e_ucred;
  pid_t e_ppid;
  pid_t e_pgid;
};
struct kinfo_proc {
  struct extern_proc kp_proc;
  struct eproc kp_eproc;
};

// ---- bsd/sys/event.h
#define EVFILT_PROC (-5)
#define EV_ADD 0x0001
#define EV_DELETE 0x0002
#define EV_ENABLE 0x0004
#define EV_ONESHOT 0x0010
#define EV_CLEAR 0x0020
#define EV_ERROR 0x4000
#define NOTE_EXIT 0x80000000u
#define NOTE_FORK 0x40000000u
#define NOTE_EXEC 0x20000000u

struct kevent {
  uintptr_t ident;
  int16_t filter;
  uint16_t flags;
  uint32_t fflags;
  intptr_t data;
  void* udata;
};
#define EV_SET(kevp, a, b, c, d, e, f) \
  do {                                 \
    struct kevent* __kevp = (kevp);    \
    __kevp->ident = (a);               \
    __kevp->filter = (int16_t)(b);     \
    __kevp->flags = (uint16_t)(c);     \
    __kevp->fflags = (uint32_t)(d);    \
    __kevp->data = (e);                \
    __kevp->udata = (f);               \
  } while (0)

// ---- the calls (libproc.h, sys/sysctl.h, sys/event.h), answered by shim.cc
int proc_listpids(uint32_t type, uint32_t typeinfo, void* buffer, int buffersize);
int proc_pidinfo(int pid, int flavor, uint64_t arg, void* buffer, int buffersize);
int proc_pidfdinfo(int pid, int fd, int flavor, void* buffer, int buffersize);
int proc_pidpath(int pid, void* buffer, uint32_t buffersize);
// glibc has no sysctl() any more, but keep clear of its old symbol.
#define sysctl cordon_xnu_sysctl
int cordon_xnu_sysctl(int* name, unsigned namelen, void* oldp, size_t* oldlenp, void* newp, size_t newlen);
int kqueue(void);
int kevent(int kq, const struct kevent* changelist, int nchanges, struct kevent* eventlist, int nevents,
           const struct timespec* timeout);

#ifdef __cplusplus
}
#endif
