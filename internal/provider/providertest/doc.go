// Package providertest owns the fault server the provider adapters test
// against: an httptest server that answers every request with one scripted
// reply or fault (an error status with headers, a connection reset, a
// truncated response, a handler that hangs) and counts the requests it saw,
// so a test can prove the SDK under test sent exactly one. It also runs the
// middleware's classification chain (a provider classifier, then
// retry.ClassifyTransport) the way the retry middleware does.
//
// It is for tests only.
package providertest
