package projection

// cache keeps the records this aggregator last read or wrote, with their
// revisions. The lease holder is the only writer, so a cached record is the
// stored one and needs no re-read. It is bounded by two generations of
// maps: when the young one fills, the old one is dropped, so memory stays
// under about size entries whatever the number of keys. Not safe for
// concurrent use; one batcher owns it.
type cache struct {
	requests generations[cachedRequest]
	sessions generations[cachedSession]
	rollups  generations[cachedRollup]
}

type cachedRollup struct {
	rec *Rollup
	rev uint64
}

type cachedRequest struct {
	rec *Request
	rev uint64
}

type cachedSession struct {
	rec *Session
	rev uint64
}

func newCache(size int) *cache {
	return &cache{requests: newGenerations[cachedRequest](size), sessions: newGenerations[cachedSession](size),
		rollups: newGenerations[cachedRollup](size)}
}

func (c *cache) request(key string) (cachedRequest, bool) { return c.requests.get(key) }
func (c *cache) putRequest(key string, v cachedRequest)   { c.requests.put(key, v) }
func (c *cache) session(key string) (cachedSession, bool) { return c.sessions.get(key) }
func (c *cache) putSession(key string, v cachedSession)   { c.sessions.put(key, v) }
func (c *cache) rollup(key string) (cachedRollup, bool)   { return c.rollups.get(key) }
func (c *cache) putRollup(key string, v cachedRollup)     { c.rollups.put(key, v) }

// generations is a bounded map: two generations of at most size/2+1
// entries each; a hit in the old one moves the entry to the young one.
type generations[V any] struct {
	size       int
	young, old map[string]V
}

func newGenerations[V any](size int) generations[V] {
	return generations[V]{size: size, young: map[string]V{}, old: map[string]V{}}
}

func (g *generations[V]) get(key string) (V, bool) {
	if v, ok := g.young[key]; ok {
		return v, true
	}
	v, ok := g.old[key]
	if ok {
		g.put(key, v)
	}
	return v, ok
}

func (g *generations[V]) put(key string, v V) {
	if g.size == 0 {
		return
	}
	if len(g.young) >= g.size/2+1 {
		g.old, g.young = g.young, make(map[string]V, len(g.young))
	}
	g.young[key] = v
}
