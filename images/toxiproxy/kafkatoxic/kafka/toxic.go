package kafka

import (
	"encoding/json"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// Toxic acts on the Kafka frames of one stream of a proxy. An upstream toxic sees the clients' requests
// (Frames = "request"), a downstream one the broker's responses (Frames = "response"). A response carries no
// API key, only the correlation id of its request, so a response fault needs an upstream toxic with Action
// "track" on the same proxy: it records the correlation ids of the matching requests, and the downstream toxic
// acts on the responses that carry them.
//
// Toxiproxy tells a toxic nothing of the connection a stub belongs to, nor of its proxy: one Toxic value serves
// every connection of its proxy and stream, and each connection's stub gets a state of its own (NewState). The
// two directions of one connection are two stubs of two toxics with nothing in common but the moment they are
// made: a proxy accepts its connections in one goroutine, and for each starts the upstream link, then the
// downstream one (Proxy.server, ToxicCollection.StartLink), each calling NewState as it starts. So a response
// toxic's new state pairs with the newest state the proxy's tracking toxic made (keyed by the proxy's name,
// which the caller gives, and the fault's token), and the two share that connection's tracked ids. Connections
// already open when the toxics are added get their states in no such order; their ids are kept per proxy,
// where two connections may have the same id in flight (librdkafka numbers each connection's requests from 1)
// and a response may be taken for the other connection's request.
type Toxic struct {
	Kind    string  `json:"kind"`   // the fault's name, for the log
	Fault   string  `json:"fault"`  // the fault's token, for the log: which lines are whose
	Proxy   string  `json:"proxy"`  // the proxy's name: the log and the tracked ids
	Frames  string  `json:"frames"` // request or response
	Action  string  `json:"action"` // delay, hold, drop, duplicate or track
	APIKeys []int16 `json:"api_keys"`
	// ClientIDs: when set, only requests whose header names one of these client ids (and, for a response
	// fault, the responses to them: the tracking toxic applies it) match
	ClientIDs        []string `json:"client_ids"`
	DelayMs          int64    `json:"delay_ms"` // delay: each frame's; hold: the longest (0: no limit)
	Count            int64    `json:"count"`    // act on the first Count matching frames only (0: every one)
	ReleaseOnConnect bool     `json:"release_on_connect"`
	// hold: release a held frame when the proxy's other connections have carried ReleaseAfterCount frames of
	// these APIs since it was held, ahead of the last of them (see Pipe)
	ReleaseAfterKeys  []int16 `json:"release_after_api_keys"`
	ReleaseAfterCount int64   `json:"release_after_count"`

	fired    atomic.Int64
	mu       sync.Mutex
	connects chan struct{} // closed, and replaced, when the proxy opens a new connection
	seen     int64         // frames of ReleaseAfterKeys passed on connections holding nothing
	waiting  []*item       // held frames waiting for seen to reach their target
}

// framesHeld counts the frames any hold took, so that a test can open "the next connection" only once the
// hold it means to release has begun.
var framesHeld atomic.Int64

type item struct {
	data      []byte
	hdr       *Header
	from      time.Time
	until     time.Time       // zero: no time limit
	held      bool            // released only by until, a new connection or the heal
	onConnect chan struct{}   // closed when the next connection opens (hold with ReleaseOnConnect)
	log       bool            // log the firing when it is released
	target    int64           // hold with ReleaseAfterKeys: released when the toxic's seen count reaches it
	release   chan struct{}   // closed when target is reached
	delivered chan struct{}   // closed once the held frame went to its connection's writer
	after     []chan struct{} // a frame that released held ones waits for them to be delivered first
}

// decision: what match decided for one frame, taken by feed when the parser emits it whole.
type decision struct {
	act   bool            // the toxic acts on it
	after []chan struct{} // not acted on, but it completes a release count: it waits for these deliveries
	hdr   Header          // the frame's header as match completed it (a response: its request's API and client)
}

type connState struct {
	decisions []decision
	holds     int // held frames of this connection decided on and not yet delivered
	parser    *Parser
	queue     []*item
	ended     bool
	ids       *trackedIDs // this connection's tracked requests, shared by its two directions (nil: not paired)
}

func (t *Toxic) GetBufferSize() int { return 1024 }

// NewState is called for each connection's stub when the connection opens (ToxicLink.Start) and for every
// open connection when the toxic is added (ToxicLink.AddToxic). Only the first is a new connection: the
// caller tells them apart, as nothing else does.
func (t *Toxic) NewState() interface{} {
	fresh := calledFrom("(*ToxicLink).Start")
	st := &connState{parser: &Parser{Requests: t.Frames != "response", OutOfStep: !fresh}}
	if fresh {
		t.newConnection()
		switch {
		case t.Action == "track":
			st.ids = &trackedIDs{ids: map[int32][]tracked{}}
			pairs.put(t.Proxy+"/"+t.Fault, st.ids)
		case t.Frames == "response":
			st.ids = pairs.take(t.Proxy + "/" + t.Fault)
		}
	}
	return st
}

func calledFrom(function string) bool {
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, function) {
			return true
		}
		if !more {
			return false
		}
	}
}

// newConnection releases the frames held until the proxy's next connection.
func (t *Toxic) newConnection() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.connects != nil {
		close(t.connects)
	}
	t.connects = make(chan struct{})
}

func (t *Toxic) nextConnect() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.connects == nil {
		t.connects = make(chan struct{})
	}
	return t.connects
}

func (t *Toxic) wants(h *Header) bool {
	if !containsKey(t.APIKeys, h.APIKey) {
		return false
	}
	if len(t.ClientIDs) == 0 {
		return true
	}
	for _, c := range t.ClientIDs {
		if c == h.ClientID {
			return true
		}
	}
	return false
}

// match decides, once per frame, whether the parser hands it over whole: when this toxic acts on it, or when
// it counts towards releasing held frames on other connections.
func (t *Toxic) match(st *connState, h *Header) bool {
	act := t.acts(st, h)
	if act && t.Action == "hold" {
		st.holds++
	}
	var after []chan struct{}
	if !act && t.Frames != "response" && st.holds == 0 && containsKey(t.ReleaseAfterKeys, h.APIKey) {
		after = t.release()
	}
	if act || after != nil {
		st.decisions = append(st.decisions, decision{act: act, after: after, hdr: *h})
		return true
	}
	return false
}

func (t *Toxic) acts(st *connState, h *Header) bool {
	ids := st.ids
	if ids == nil {
		ids = perProxy(t.Proxy + "/" + t.Fault)
	}
	if t.Frames == "response" {
		req, ok := ids.take(h.CorrelationID)
		if !ok {
			return false
		}
		h.APIKey, h.ClientID = req.key, req.client
	} else if !t.wants(h) {
		return false
	}
	if t.Action == "track" {
		ids.add(h.CorrelationID, tracked{h.APIKey, h.ClientID})
		return false
	}
	return t.Count <= 0 || t.fired.Add(1) <= t.Count
}

// Pipe passes the stream on in order. A delayed or held frame keeps every later byte of its connection's
// direction behind it, as a slow TCP segment would: Kafka answers a connection's requests in order, and Java
// clients (brokers and controllers among them) close a connection whose next response is not for their oldest
// request, so letting later frames overtake would turn a delay into a reset on links between nodes. A client
// that gives up on a held request opens a new connection, which passes (and, with ReleaseOnConnect, releases
// the held frame onto the old one: a request delivered after its sender moved on). A held frame outlives its
// client: when the client closes the connection the queue is still delivered, on the broker-side connection
// Toxiproxy keeps open until this stub closes its output, and only then does that connection close.
// With ReleaseAfterKeys, the frame that completes the count on another connection waits until the held frames
// it releases were handed to their connections' writers, so the broker reads the held frame first (the two
// connections are still read by the broker independently: the order is the bytes', not the handling's).
func (t *Toxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*connState)
	for {
		t.flush(stub, st, "")
		if st.ended && len(st.queue) == 0 {
			stub.Close()
			return
		}
		var timer <-chan time.Time
		var connected chan struct{}
		stop := func() bool { return false }
		if len(st.queue) > 0 {
			head := st.queue[0]
			if !head.until.IsZero() {
				tm := time.NewTimer(time.Until(head.until))
				stop = tm.Stop
				timer = tm.C
			}
			connected = head.waitOn()
		}
		input := stub.Input
		if st.ended {
			input = nil
		}
		select {
		case <-stub.Interrupt:
			return // the queue stays in the stub's state: the toxic runs on after a chain change
		case c := <-input:
			if c == nil {
				st.ended = true
				continue
			}
			t.feed(st, c)
		case <-timer:
		case <-connected:
		}
		stop()
	}
}

// waitOn: the channel whose closing may let the item go (nil: none).
func (it *item) waitOn() chan struct{} {
	for _, c := range it.after {
		if !isClosed(c) {
			return c
		}
	}
	if it.release != nil {
		return it.release
	}
	return it.onConnect
}

// release counts a frame of ReleaseAfterKeys seen on a connection holding nothing, and returns the delivery
// channels of the held frames that count releases.
func (t *Toxic) release() []chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen++
	var released []chan struct{}
	rest := t.waiting[:0]
	for _, it := range t.waiting {
		if it.target <= t.seen {
			close(it.release)
			released = append(released, it.delivered)
		} else {
			rest = append(rest, it)
		}
	}
	t.waiting = rest
	return released
}

func (t *Toxic) waitForCount(it *item) {
	t.mu.Lock()
	defer t.mu.Unlock()
	it.target = t.seen + t.ReleaseAfterCount
	it.release = make(chan struct{})
	t.waiting = append(t.waiting, it)
}

func containsKey(keys []int16, key int16) bool {
	for _, k := range keys {
		if k == key {
			return true
		}
	}
	return false
}

func (t *Toxic) feed(st *connState, c *stream.StreamChunk) {
	for _, p := range st.parser.Feed(c.Data, func(h Header) bool { return t.match(st, &h) }) {
		if p.Frame == nil {
			st.queue = append(st.queue, &item{data: p.Data})
			continue
		}
		d := st.decisions[0]
		st.decisions = st.decisions[1:]
		p.Frame = &d.hdr
		if !d.act {
			st.queue = append(st.queue, &item{data: p.Data, after: d.after})
			continue
		}
		now := time.Now()
		switch t.Action {
		case "drop":
			t.logFiring(p.Frame, now, now, "dropped")
		case "duplicate":
			st.queue = append(st.queue, &item{data: p.Data}, &item{data: p.Data})
			t.logFiring(p.Frame, now, now, "duplicated")
		case "delay":
			st.queue = append(st.queue, &item{data: p.Data, hdr: p.Frame, from: c.Timestamp,
				until: c.Timestamp.Add(time.Duration(t.DelayMs) * time.Millisecond), held: true, log: true})
		case "hold":
			framesHeld.Add(1)
			it := &item{data: p.Data, hdr: p.Frame, from: c.Timestamp, held: true, log: true}
			if t.DelayMs > 0 {
				it.until = c.Timestamp.Add(time.Duration(t.DelayMs) * time.Millisecond)
			}
			if t.ReleaseOnConnect {
				it.onConnect = t.nextConnect()
			}
			it.delivered = make(chan struct{})
			if len(t.ReleaseAfterKeys) > 0 && t.ReleaseAfterCount > 0 {
				t.waitForCount(it)
			}
			st.queue = append(st.queue, it)
		default:
			st.queue = append(st.queue, &item{data: p.Data})
		}
	}
}

// flush writes the queue's head items that may go; `healed` (the toxic being removed) lets every one go.
func (t *Toxic) flush(stub *toxics.ToxicStub, st *connState, healed string) {
	for len(st.queue) > 0 {
		head := st.queue[0]
		why := healed
		if why == "" && head.held {
			switch {
			case !head.until.IsZero() && !time.Now().Before(head.until):
				why = "time"
			case head.onConnect != nil && isClosed(head.onConnect):
				why = "connection"
			case head.release != nil && isClosed(head.release):
				why = "after"
			default:
				return
			}
		}
		if why == "" && head.waitOn() != nil {
			return // released held frames on other connections go first
		}
		if head.log {
			t.logFiring(head.hdr, head.from, time.Now(), why)
		}
		st.queue = st.queue[1:]
		stub.Output <- &stream.StreamChunk{Data: head.data, Timestamp: time.Now()}
		if head.delivered != nil {
			st.holds--
			t.delivered(head)
		}
	}
}

// delivered: the held frame went (released, timed out or healed); it no longer waits for the count.
func (t *Toxic) delivered(it *item) {
	t.mu.Lock()
	defer t.mu.Unlock()
	close(it.delivered)
	for i, w := range t.waiting {
		if w == it {
			t.waiting = append(t.waiting[:i], t.waiting[i+1:]...)
			break
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Cleanup runs when the toxic is removed (the fault's heal): held frames are delivered, not dropped, and so is a
// frame the parser had begun to buffer.
func (t *Toxic) Cleanup(stub *toxics.ToxicStub) {
	st := stub.State.(*connState)
	if rest := st.parser.Pending(); len(rest) > 0 {
		st.queue = append(st.queue, &item{data: rest})
	}
	t.flush(stub, st, "heal")
	if st.ended {
		stub.Close()
	}
}

var logMu sync.Mutex

// firingLog: where firings are written (the container's output, which kafka-chaos reads at the heal).
var firingLog io.Writer = os.Stdout

// Firing is one line of the toxic's log (stdout, one JSON object a line, beside Toxiproxy's own lines).
type Firing struct {
	KafkaToxic    string `json:"kafka_toxic"` // always "fired": what tells these lines from Toxiproxy's
	Kind          string `json:"kind"`
	Fault         string `json:"fault"`
	Proxy         string `json:"proxy"`
	Frames        string `json:"frames"`
	APIKey        int16  `json:"api_key"`
	APIVersion    int16  `json:"api_version"`
	CorrelationID int32  `json:"correlation_id"`
	ClientID      string `json:"client_id"` // the request's (a response's: its request's) header client_id
	HeldFrom      int64  `json:"held_from"` // ms since the epoch
	HeldTo        int64  `json:"held_to"`
	Released      string `json:"released"` // time, connection, after (ReleaseAfterKeys), heal, dropped, duplicated
}

func (t *Toxic) logFiring(h *Header, from, to time.Time, why string) {
	line, _ := json.Marshal(Firing{"fired", t.Kind, t.Fault, t.Proxy, t.Frames, h.APIKey, h.APIVersion, h.CorrelationID,
		h.ClientID, from.UnixMilli(), to.UnixMilli(), why})
	logMu.Lock()
	defer logMu.Unlock()
	_, _ = firingLog.Write(append(line, '\n'))
}

// trackedIDs: the correlation ids of tracked requests whose responses have not passed yet, with their API keys
// and client ids.
type trackedIDs struct {
	mu  sync.Mutex
	ids map[int32][]tracked
}

// tracked: what a response's toxic knows of its request only from the tracking toxic.
type tracked struct {
	key    int16
	client string
}

func (r *trackedIDs) add(id int32, key tracked) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[id] = append(r.ids[id], key)
}

func (r *trackedIDs) take(id int32) (tracked, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := r.ids[id]
	if len(keys) == 0 {
		return tracked{}, false
	}
	if len(keys) == 1 {
		delete(r.ids, id)
	} else {
		r.ids[id] = keys[1:]
	}
	return keys[0], true
}

// registry: per proxy and fault, the tracked ids of connections that are not paired, and the tracking state of
// the newest connection, waiting for its downstream half.
type registry struct {
	mu     sync.Mutex
	shared map[string]*trackedIDs
	newest map[string]*trackedIDs
}

var pairs = &registry{shared: map[string]*trackedIDs{}, newest: map[string]*trackedIDs{}}

func perProxy(key string) *trackedIDs {
	pairs.mu.Lock()
	defer pairs.mu.Unlock()
	ids := pairs.shared[key]
	if ids == nil {
		ids = &trackedIDs{ids: map[int32][]tracked{}}
		pairs.shared[key] = ids
	}
	return ids
}

func (r *registry) put(key string, ids *trackedIDs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.newest[key] = ids
}

func (r *registry) take(key string) *trackedIDs {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := r.newest[key]
	delete(r.newest, key)
	return ids
}

func init() {
	toxics.Register("kafka", new(Toxic))
}
