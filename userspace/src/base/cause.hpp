// The diagnosis causes: the stable machine tokens a report and an Error carry in
// "cause" (documented in userspace/README.md and the man page). core/diagnosis decides
// which applies; sys names one where a failure can only be one thing (the out-of-band
// socket: the network path).
#pragma once

// Stable machine tokens (documented in userspace/README.md and the man page).
namespace rxv::cause {
inline constexpr const char* kMemlock = "memlock";
inline constexpr const char* kRxeMetadataOrder = "rxe_metadata_order";
inline constexpr const char* kFragmentation = "fragmentation";
inline constexpr const char* kOutOfMemory = "out_of_memory";
inline constexpr const char* kDeviceDown = "device_down";
inline constexpr const char* kNoDevice = "no_device";
inline constexpr const char* kDeviceAccess = "device_access";  // uverbs node not openable
inline constexpr const char* kNetwork = "network_path_or_firewall";
inline constexpr const char* kDataCorruption = "data_corruption";
inline constexpr const char* kTransferError = "transfer_error";
// two hosts: a reply whose request id is not the request's (lost, repeated or late), and
// a request the server did not answer in time (the TCP connection itself still up)
inline constexpr const char* kPeerOutOfStep = "peer_out_of_step";
inline constexpr const char* kPeerTimeout = "peer_timeout";
inline constexpr const char* kUnknown = "unknown";
}  // namespace rxv::cause
