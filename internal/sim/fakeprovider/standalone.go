package fakeprovider

// Listen starts a server on addr (host:port; port 0 picks one) that also
// serves every endpoint at the provider's own path, so that an SDK or a
// gateway given its URL() as the provider's origin works unchanged. With
// the built-in dialects:
//
//	POST /v1/messages                                   Anthropic Messages
//	POST /v1/chat/completions, /v1/responses, /v1/embeddings   OpenAI
//	POST /v1beta/models/{model}:generateContent         Gemini
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//
// A path two dialects serve is the first one's at the root (an
// OpenAI-compatible provider is then reached under its prefix only). The
// prefixed paths of BaseURL keep working too. Like New's, its truth is
// grouped by the ledger headers of each request (HeaderSessionID,
// HeaderRequestID, HeaderAttempt), which a gateway sends upstream only
// when asked to.
func Listen(addr string, opts Options) (*Server, error) {
	return listen(addr, opts, true)
}
