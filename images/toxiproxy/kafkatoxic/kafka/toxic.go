package kafka

import (
	"encoding/json"
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
	Kind             string  `json:"kind"`   // the fault's name, for the log
	Fault            string  `json:"fault"`  // the fault's token, for the log: which lines are whose
	Proxy            string  `json:"proxy"`  // the proxy's name: the log and the tracked ids
	Frames           string  `json:"frames"` // request or response
	Action           string  `json:"action"` // delay, hold, drop, duplicate or track
	APIKeys          []int16 `json:"api_keys"`
	DelayMs          int64   `json:"delay_ms"` // delay: each frame's; hold: the longest (0: no limit)
	Count            int64   `json:"count"`    // act on the first Count matching frames only (0: every one)
	ReleaseOnConnect bool    `json:"release_on_connect"`

	fired    atomic.Int64
	mu       sync.Mutex
	connects chan struct{} // closed, and replaced, when the proxy opens a new connection
}

type item struct {
	data      []byte
	hdr       *Header
	from      time.Time
	until     time.Time     // zero: no time limit
	held      bool          // released only by until, a new connection or the heal
	onConnect chan struct{} // closed when the next connection opens (hold with ReleaseOnConnect)
	log       bool          // log the firing when it is released
}

type connState struct {
	parser *Parser
	queue  []*item
	ended  bool
	ids    *trackedIDs // this connection's tracked requests, shared by its two directions (nil: not paired)
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
			st.ids = &trackedIDs{ids: map[int32][]int16{}}
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

func (t *Toxic) wants(key int16) bool {
	for _, k := range t.APIKeys {
		if k == key {
			return true
		}
	}
	return false
}

// match decides, once per frame, whether this toxic acts on it.
func (t *Toxic) match(st *connState, h *Header) bool {
	ids := st.ids
	if ids == nil {
		ids = perProxy(t.Proxy + "/" + t.Fault)
	}
	if t.Frames == "response" {
		key, ok := ids.take(h.CorrelationID)
		if !ok {
			return false
		}
		h.APIKey = key
	} else if !t.wants(h.APIKey) {
		return false
	}
	if t.Action == "track" {
		ids.add(h.CorrelationID, h.APIKey)
		return false
	}
	return t.Count <= 0 || t.fired.Add(1) <= t.Count
}

// Pipe passes the stream on in order. A delayed or held frame keeps every later byte of its connection's
// direction behind it, as a slow TCP segment would: Kafka answers a connection's requests in order, and Java
// clients (brokers and controllers among them) close a connection whose next response is not for their oldest
// request, so letting later frames overtake would turn a delay into a reset on links between nodes. A client
// that gives up on a held request opens a new connection, which passes (and, with ReleaseOnConnect, releases
// the held frame onto the old one: a request delivered after its sender moved on).
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
			connected = head.onConnect
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

func (t *Toxic) feed(st *connState, c *stream.StreamChunk) {
	for _, p := range st.parser.Feed(c.Data, func(h Header) bool { return t.match(st, &h) }) {
		if p.Frame == nil {
			st.queue = append(st.queue, &item{data: p.Data})
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
			it := &item{data: p.Data, hdr: p.Frame, from: c.Timestamp, held: true, log: true}
			if t.DelayMs > 0 {
				it.until = c.Timestamp.Add(time.Duration(t.DelayMs) * time.Millisecond)
			}
			if t.ReleaseOnConnect {
				it.onConnect = t.nextConnect()
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
			default:
				return
			}
		}
		if head.log {
			t.logFiring(head.hdr, head.from, time.Now(), why)
		}
		st.queue = st.queue[1:]
		stub.Output <- &stream.StreamChunk{Data: head.data, Timestamp: time.Now()}
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
	HeldFrom      int64  `json:"held_from"` // ms since the epoch
	HeldTo        int64  `json:"held_to"`
	Released      string `json:"released"` // time, connection, heal, dropped, duplicated
}

func (t *Toxic) logFiring(h *Header, from, to time.Time, why string) {
	line, _ := json.Marshal(Firing{"fired", t.Kind, t.Fault, t.Proxy, t.Frames, h.APIKey, h.APIVersion, h.CorrelationID,
		from.UnixMilli(), to.UnixMilli(), why})
	logMu.Lock()
	defer logMu.Unlock()
	_, _ = os.Stdout.Write(append(line, '\n'))
}

// trackedIDs: the correlation ids of tracked requests whose responses have not passed yet, with their API keys.
type trackedIDs struct {
	mu  sync.Mutex
	ids map[int32][]int16
}

func (r *trackedIDs) add(id int32, key int16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids[id] = append(r.ids[id], key)
}

func (r *trackedIDs) take(id int32) (int16, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := r.ids[id]
	if len(keys) == 0 {
		return 0, false
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
		ids = &trackedIDs{ids: map[int32][]int16{}}
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
