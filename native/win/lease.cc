// The leased anchor's endpoint (issue #17, native/protocol.h "Leases: Windows"): the
// named pipe an adopting host connects to. Kept out of anchor.cc, which only
// drives it.
//
// Who may connect: the pipe's DACL holds one ACE, granting the anchor's own
// user SID (from its process token) read, write and new instances; it is
// protected (nothing inherited) and replaces the default DACL, which would
// also admit SYSTEM, Administrators and the logon session. The first instance is
// created with FILE_FLAG_FIRST_PIPE_INSTANCE: if a pipe of that name exists
// already (anyone's), creation fails rather than joining it.
// PIPE_REJECT_REMOTE_CLIENTS: local clients only.
#include <vector>

#include "win.h"

namespace cordon {
namespace win {

HANDLE create_lease_pipe(const std::wstring& name, bool first, DWORD& err) {
  err = 0;
  std::vector<unsigned char> sid;
  if (!own_sid(sid)) {
    err = GetLastError() ? GetLastError() : ERROR_ACCESS_DENIED;
    return INVALID_HANDLE_VALUE;
  }
  DWORD acl_size = sizeof(ACL) + sizeof(ACCESS_ALLOWED_ACE) + static_cast<DWORD>(sid.size());
  std::vector<unsigned char> acl_buf(acl_size);
  PACL acl = reinterpret_cast<PACL>(acl_buf.data());
  SECURITY_DESCRIPTOR sd;
  if (!InitializeAcl(acl, acl_size, ACL_REVISION) ||
      !AddAccessAllowedAce(acl, ACL_REVISION, GENERIC_READ | GENERIC_WRITE | FILE_CREATE_PIPE_INSTANCE | SYNCHRONIZE,
                           sid.data()) ||
      !InitializeSecurityDescriptor(&sd, SECURITY_DESCRIPTOR_REVISION) || !SetSecurityDescriptorDacl(&sd, TRUE, acl, FALSE) ||
      !SetSecurityDescriptorControl(&sd, SE_DACL_PROTECTED, SE_DACL_PROTECTED)) {
    err = GetLastError();
    return INVALID_HANDLE_VALUE;
  }
  SECURITY_ATTRIBUTES sa = {sizeof sa, &sd, FALSE};
  HANDLE pipe = CreateNamedPipeW(name.c_str(),
                                 PIPE_ACCESS_DUPLEX | FILE_FLAG_OVERLAPPED | (first ? FILE_FLAG_FIRST_PIPE_INSTANCE : 0),
                                 PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
                                 PIPE_UNLIMITED_INSTANCES, 4096, 4096, 0, &sa);
  if (pipe == INVALID_HANDLE_VALUE) err = GetLastError();
  return pipe;
}

}  // namespace win
}  // namespace cordon
