package projection

// cache keeps the records this aggregator last read or wrote, with their
// revisions. The lease holder is the only writer, so a cached record is the
// stored one and needs no re-read. It is bounded by two generations of
// maps: when the young one fills, the old one is dropped, so memory stays
// under about size entries whatever the number of keys. Not safe for
// concurrent use; one batcher owns it.
type cache struct {
	size             int
	reqYoung, reqOld map[string]cachedRequest
	sesYoung, sesOld map[string]cachedSession
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
	return &cache{
		size:     size,
		reqYoung: map[string]cachedRequest{}, reqOld: map[string]cachedRequest{},
		sesYoung: map[string]cachedSession{}, sesOld: map[string]cachedSession{},
	}
}

func (c *cache) request(key string) (cachedRequest, bool) {
	if v, ok := c.reqYoung[key]; ok {
		return v, true
	}
	v, ok := c.reqOld[key]
	if ok {
		c.putRequest(key, v)
	}
	return v, ok
}

func (c *cache) putRequest(key string, v cachedRequest) {
	if c.size == 0 {
		return
	}
	if len(c.reqYoung) >= c.size/2+1 {
		c.reqOld, c.reqYoung = c.reqYoung, make(map[string]cachedRequest, len(c.reqYoung))
	}
	c.reqYoung[key] = v
}

func (c *cache) session(key string) (cachedSession, bool) {
	if v, ok := c.sesYoung[key]; ok {
		return v, true
	}
	v, ok := c.sesOld[key]
	if ok {
		c.putSession(key, v)
	}
	return v, ok
}

func (c *cache) putSession(key string, v cachedSession) {
	if c.size == 0 {
		return
	}
	if len(c.sesYoung) >= c.size/2+1 {
		c.sesOld, c.sesYoung = c.sesYoung, make(map[string]cachedSession, len(c.sesYoung))
	}
	c.sesYoung[key] = v
}
