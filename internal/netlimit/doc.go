// Package netlimit owns the limits a network-facing HTTP server sets on
// what its clients may hold, and how it refuses them:
//
//   - Listener caps the connections open at once. At the cap it stops
//     accepting (new connections wait in the kernel's backlog until one
//     closes) rather than running the process out of file descriptors;
//     accept errors (EMFILE and the like) are retried with a backoff.
//   - Budget is a byte budget of request bodies in flight, shared by every
//     request. ReadBody reads a body against it chunk by chunk, charging
//     the memory it actually holds, never what the request declares.
//   - PerKey caps the calls in flight of one client key.
//   - Timeouts bound what a slow client can hold without cutting a long
//     answer: a body must arrive within BodyTimeout plus one second per
//     MinBodyRate bytes; each write (each event of a stream) has
//     WriteTimeout of its own, extended per write, rather than a total.
//   - Refusals counts every refusal by reason and logs it at WARN, at
//     most once per interval per reason with the count since the last
//     record, so that a flood cannot flood the log.
//   - Server runs an http.Server on a Listener with header and idle
//     timeouts (no total read or write timeout: Timeouts bound the body
//     and each write) and shuts it down gracefully when its context ends:
//     requests in flight get ShutdownTimeout, then are cut.
//     DescriptorCap lowers a connection cap to what the file descriptor
//     limit leaves.
//
// Nothing here starts a goroutine but Server.Serve, whose server runs
// until Serve's context ends and is waited for; the Listener's Accept
// blocks in the caller's.
package netlimit
