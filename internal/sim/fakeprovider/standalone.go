package fakeprovider

import "net/http"

// Listen starts a server on addr (host:port; port 0 picks one) that also
// serves every endpoint at the provider's own path, so that an SDK or a
// gateway given its URL() as the provider's origin works unchanged:
//
//	POST /v1/messages                                   Anthropic Messages
//	POST /v1/chat/completions, /v1/responses, /v1/embeddings   OpenAI
//	POST /v1beta/models/{model}:generateContent         Gemini
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//
// The prefixed paths of BaseURL keep working too. Like New's, its truth
// is grouped by the ledger headers of each request (HeaderSessionID,
// HeaderRequestID, HeaderAttempt), which a gateway sends upstream only
// when asked to.
func Listen(addr string, opts Options) (*Server, error) {
	return listen(addr, opts, true)
}

// rootRoutes registers the endpoints at the providers' own paths.
func (s *Server) rootRoutes(mux *http.ServeMux, counted func(http.HandlerFunc) http.HandlerFunc) {
	mux.HandleFunc("POST /v1/messages", counted(s.anthropicMessages))
	mux.HandleFunc("POST /v1/chat/completions", counted(s.openaiChatCompletions))
	mux.HandleFunc("POST /v1/responses", counted(s.openaiResponses))
	mux.HandleFunc("POST /v1/embeddings", counted(s.openaiEmbeddings))
	mux.HandleFunc("POST /v1beta/models/", counted(s.geminiModels))
}
