// Which certificate a host trusts for each TLS worker (docs/security.md,
// "TLS"): a pin in the endpoint (tls://HOST:PORT#sha256:HEX) wins; else the
// line for HOST:PORT in the known-workers file; a worker in neither is
// trusted on first use (recorded, with a message on stderr) when allowed,
// else refused. A recorded fingerprint that no longer matches is refused.
//
// The file: one "HOST:PORT sha256:HEX" per line, '#' comments; HOST:PORT as
// the host wrote it (a name and its address are different entries).
#pragma once

#include <filesystem>
#include <string>

#include "weft/rpc/client.h"

namespace weft::rpc {

// RpcOptions::known_workers_file, or $WEFT_KNOWN_WORKERS, or
// $XDG_CONFIG_HOME/weft/known_workers, or ~/.config/weft/known_workers.
std::filesystem::path known_workers_path(const RpcOptions& options);

// Checks the fingerprint a TLS worker at hostport presented. pin: the
// endpoint's own ("" for none). Throws Error(invalid_input) naming the
// endpoint, both fingerprints and the file when the worker is not trusted.
void check_worker_fingerprint(const std::string& hostport, const std::string& pin, const std::string& presented,
                              const RpcOptions& options);

}  // namespace weft::rpc
