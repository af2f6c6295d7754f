package gateway

import (
	"log/slog"
	"net/http"
	"net/http/httputil"
)

// newProxy is the reverse proxy of the requests the gateway does not
// account: to the upstream resolve picked (its origin, path prefix
// included, followed by the path relative to the provider's mount),
// unchanged but for the hop-by-hop headers and (unless forwarded) the
// ledger's own.
func (g *Gateway) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t, _ := pr.In.Context().Value(targetKey{}).(*target)
			if t == nil {
				resolved, ok := g.mounts.resolve(pr.In)
				if !ok {
					return // ServeHTTP answers such a request itself
				}
				t = &resolved
			}
			u := upstreamURL(t.u.origin, t, pr.In.URL.RawQuery)
			pr.Out.URL = u
			pr.Out.Host = ""
			if !g.cfg.ForwardLedgerHeaders {
				for _, k := range []string{HeaderSessionID, HeaderRequestID, HeaderAttempt} {
					pr.Out.Header.Del(k)
				}
			}
			pr.Out.Header.Del(HeaderLabels) // the ledger's, never the upstream's
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
		upstream := ""
		if t, _ := r.Context().Value(targetKey{}).(*target); t != nil {
			upstream = t.u.name
		}
		g.log.LogAttrs(r.Context(), slog.LevelInfo, "gateway: not accounted: proxied through unchanged (logged once per path)",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("upstream", upstream))
		if full {
			g.log.LogAttrs(r.Context(), slog.LevelInfo, "gateway: further paths that are not accounted are not logged")
		}
	}
	g.proxy.ServeHTTP(w, r)
}
