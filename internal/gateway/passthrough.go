package gateway

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
)

// newProxy is the reverse proxy of the requests the gateway does not
// account: to the upstream passthroughProvider picks, unchanged but for
// the hop-by-hop headers and (unless forwarded) the ledger's own.
func (g *Gateway) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			p, _ := pr.In.Context().Value(providerKey{}).(string)
			if p == "" {
				p = passthroughProvider(pr.In)
			}
			pr.SetURL(g.origins[p])
			if !g.cfg.ForwardLedgerHeaders {
				for _, k := range []string{HeaderSessionID, HeaderRequestID, HeaderAttempt} {
					pr.Out.Header.Del(k)
				}
			}
		},
		Transport:     g.transport,
		FlushInterval: -1, // a streamed answer goes through as it comes
		ErrorHandler:  g.passthroughError,
	}
}

// passthrough proxies a request the gateway does not account, and logs
// the first one of each path.
func (g *Gateway) passthrough(w http.ResponseWriter, r *http.Request) {
	if first, full := g.unaccounted.first(r.Method + " " + r.URL.Path); first {
		g.log.LogAttrs(r.Context(), slog.LevelInfo, "gateway: not accounted: proxied through unchanged (logged once per path)",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("upstream", passthroughProvider(r)))
		if full {
			g.log.LogAttrs(r.Context(), slog.LevelInfo, "gateway: further paths that are not accounted are not logged")
		}
	}
	g.proxy.ServeHTTP(w, r)
}
