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
// two directions of one connection are two stubs of two toxics with nothing in common. So the tracked ids are
// kept per proxy (Proxy: the caller names it) in this process, keyed by correlation id. Clients number their
// requests per client (Java) or per broker connection (librdkafka), so two connections of one proxy can have
// the same id in flight; a response is then taken for the other connection's request. The ids are counted, so
// each tracked request still lets exactly one response match.
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
}

func (t *Toxic) GetBufferSize() int { return 1024 }

// NewState is called for each connection's stub when the connection opens (ToxicLink.Start) and for every
// open connection when the toxic is added (ToxicLink.AddToxic). Only the first is a new connection: the
// caller tells them apart, as nothing else does.
func (t *Toxic) NewState() interface{} {
	fresh := calledFrom("(*ToxicLink).Start")
	if fresh {
		t.newConnection()
	}
	return &connState{parser: &Parser{Requests: t.Frames != "response", OutOfStep: !fresh}}
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
func (t *Toxic) match(h *Header) bool {
	if t.Frames == "response" {
		key, ok := tracked.take(t.Proxy, h.CorrelationID)
		if !ok {
			return false
		}
		h.APIKey = key
	} else if !t.wants(h.APIKey) {
		return false
	}
	if t.Action == "track" {
		tracked.add(t.Proxy, h.CorrelationID, h.APIKey)
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
	for _, p := range st.parser.Feed(c.Data, func(h Header) bool { return t.match(&h) }) {
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

// trackedIDs: per proxy, the correlation ids of tracked requests whose responses have not passed yet.
type trackedIDs struct {
	mu  sync.Mutex
	ids map[string]map[int32][]int16
}

var tracked = &trackedIDs{ids: map[string]map[int32][]int16{}}

func (r *trackedIDs) add(proxy string, id int32, key int16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.ids[proxy]
	if m == nil {
		m = map[int32][]int16{}
		r.ids[proxy] = m
	}
	m[id] = append(m[id], key)
}

func (r *trackedIDs) take(proxy string, id int32) (int16, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := r.ids[proxy][id]
	if len(keys) == 0 {
		return 0, false
	}
	if len(keys) == 1 {
		delete(r.ids[proxy], id)
	} else {
		r.ids[proxy][id] = keys[1:]
	}
	return keys[0], true
}

func init() {
	toxics.Register("kafka", new(Toxic))
}
