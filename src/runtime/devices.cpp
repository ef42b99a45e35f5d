// Device specs: parsing and opening (include/weft/runtime/devices.h).
#include "weft/runtime/devices.h"

#include <algorithm>
#include <charconv>
#include <fstream>

#include "weft/backend/cpu.h"
#include "weft/core/error.h"
#include "weft/testing/async.h"

namespace weft {
namespace {

constexpr const char* kDevicesWhere = "device";
constexpr const char* kKnownForms =
    "cpu, cpu:THREADS, rpc://HOST:PORT[/N], tls://HOST:PORT[#sha256:HEX][/N], async, async-copy";
constexpr int kMaxThreads = 4096;
constexpr int kMaxDeviceIndex = 63;

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A decimal in [lo, hi], or -1.
int parse_int(std::string_view s, int lo, int hi) {
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) return -1;
  return v;
}

[[noreturn]] void bad_spec(std::string_view spec, const std::string& why) {
  fail(ErrorKind::invalid_input, kDevicesWhere, "device spec '" + std::string(spec) + "': " + why);
}

// "HOST:PORT" or "[v6addr]:PORT" with a port in 1..65535.
void check_endpoint(std::string_view spec, std::string_view endpoint) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    bad_spec(spec, "'" + std::string(endpoint) + "' is not HOST:PORT");
  const std::string_view host = endpoint.substr(0, colon);
  if (host.front() == '[' && host.back() != ']') bad_spec(spec, "an IPv6 address needs its closing ']'");
  if (parse_int(endpoint.substr(colon + 1), 1, 65535) < 0)
    bad_spec(spec, "'" + std::string(endpoint.substr(colon + 1)) + "' is not a port (1 to 65535)");
}

}  // namespace

std::string DeviceSpec::label() const {
  switch (kind) {
    case DeviceSpecKind::cpu: return "host";
    case DeviceSpecKind::rpc: return index == 0 ? endpoint : endpoint + "/" + std::to_string(index);
    case DeviceSpecKind::async:
    case DeviceSpecKind::async_copy: return text;
  }
  return text;
}

DeviceSpec parse_device_spec(std::string_view given) {
  const std::string_view spec = trim(given);
  DeviceSpec d;
  d.text = std::string(spec);
  if (spec.empty())
    fail(ErrorKind::invalid_input, kDevicesWhere, std::string("empty device spec (known: ") + kKnownForms + ")");
  if (spec == "cpu") return d;
  if (spec.substr(0, 4) == "cpu:") {
    d.threads = parse_int(spec.substr(4), 1, kMaxThreads);
    if (d.threads < 0) bad_spec(spec, "'" + std::string(spec.substr(4)) + "' is not a thread count (1 to 4096)");
    return d;
  }
  if (spec == "async" || spec == "async-copy") {
    d.kind = spec == "async" ? DeviceSpecKind::async : DeviceSpecKind::async_copy;
    return d;
  }
  constexpr std::string_view kRpc = "rpc://", kTls = "tls://";
  const bool tls = spec.substr(0, kTls.size()) == kTls;
  if (spec.substr(0, kRpc.size()) == kRpc || tls) {
    d.kind = DeviceSpecKind::rpc;
    std::string_view rest = spec.substr(kRpc.size());
    // The device index follows the '/', which an endpoint never holds.
    if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
      d.index = parse_int(rest.substr(slash + 1), 0, kMaxDeviceIndex);
      if (d.index < 0)
        bad_spec(spec, "'" + std::string(rest.substr(slash + 1)) + "' is not a device index (0 to 63)");
      rest = rest.substr(0, slash);
    }
    // A TLS worker's pin follows '#' (checked where the endpoint is opened).
    const size_t hash = tls ? rest.find('#') : std::string_view::npos;
    check_endpoint(spec, rest.substr(0, hash));
    d.endpoint = (tls ? "tls://" : "") + std::string(rest);
    return d;
  }
  fail(ErrorKind::invalid_input, kDevicesWhere,
       "unknown device spec '" + std::string(spec) + "' (known: " + kKnownForms + ")");
}

std::vector<DeviceSpec> parse_device_specs(std::string_view list) {
  std::vector<DeviceSpec> specs;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    specs.push_back(parse_device_spec(list.substr(start, comma == std::string_view::npos ? list.npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return specs;
}

DeviceSpec worker_device_spec(std::string_view endpoint) {
  const std::string_view e = trim(endpoint);
  if (e.find("://") != std::string_view::npos) return parse_device_spec(e);  // already a spec
  return parse_device_spec("rpc://" + std::string(e));
}

std::vector<DeviceSpec> parse_workers_file(std::string_view text, const std::string& name) {
  if (text.size() > kMaxWorkersFileBytes)
    fail(ErrorKind::invalid_input, name, std::to_string(text.size()) + " bytes: a workers file holds at most " +
                                             std::to_string(kMaxWorkersFileBytes));
  std::vector<DeviceSpec> specs;
  size_t line_no = 0;
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // a file written on Windows
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    DeviceSpec spec;
    try {
      spec = worker_device_spec(line);  // a worker or an error: `--worker` takes no other device
    } catch (const Error& e) {
      fail(ErrorKind::invalid_input, name + ":" + std::to_string(line_no), e.what());
    }
    if (std::any_of(specs.begin(), specs.end(), [&](const DeviceSpec& s) { return s.text == spec.text; })) continue;
    if (specs.size() == kMaxWorkersInFile)
      fail(ErrorKind::invalid_input, name, "more than " + std::to_string(kMaxWorkersInFile) + " workers");
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<DeviceSpec> read_workers_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::invalid_input, path, "cannot read the workers file");
  std::string text(kMaxWorkersFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_workers_file(text, path);
}

std::unique_ptr<Device> open_device(const DeviceSpec& spec, const DeviceOptions& options) {
  switch (spec.kind) {
    case DeviceSpecKind::cpu: return make_cpu_device(spec.threads > 0 ? spec.threads : options.cpu_threads);
    case DeviceSpecKind::async:
    case DeviceSpecKind::async_copy: {
      AsyncOptions a;
      a.n_threads = options.cpu_threads > 0 ? options.cpu_threads : 1;
      a.random_delay_ms = options.async_random_delay_ms;
      a.seed = options.async_seed;
      a.isolated_memory = spec.kind == DeviceSpecKind::async_copy;
      return make_async_device(a);
    }
    case DeviceSpecKind::rpc: {
      std::vector<std::unique_ptr<Device>> devices = make_rpc_devices(spec.endpoint, options.rpc);
      if (static_cast<size_t>(spec.index) >= devices.size())
        fail(ErrorKind::invalid_input, kDevicesWhere,
             "device spec '" + spec.text + "': the worker serves " + std::to_string(devices.size()) + " device" +
                 (devices.size() == 1 ? "" : "s"));
      return std::move(devices[static_cast<size_t>(spec.index)]);
    }
  }
  fail(ErrorKind::internal, kDevicesWhere, "unknown device spec kind");
}

}  // namespace weft
