package kafka

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

type rig struct {
	in    chan *stream.StreamChunk
	out   chan *stream.StreamChunk
	stub  *toxics.ToxicStub
	toxic *Toxic
	wrap  *toxics.ToxicWrapper
}

func start(t *Toxic) *rig {
	// unbuffered: a send returns once the toxic has taken the chunk, so it has dealt with every earlier one
	r := &rig{in: make(chan *stream.StreamChunk), out: make(chan *stream.StreamChunk, 16), toxic: t}
	r.stub = toxics.NewToxicStub(r.in, r.out)
	r.stub.State = &connState{parser: &Parser{Requests: t.Frames != "response"}}
	r.wrap = &toxics.ToxicWrapper{Toxic: t, Toxicity: 1}
	go r.stub.Run(r.wrap)
	return r
}

func (r *rig) send(b []byte) { r.in <- &stream.StreamChunk{Data: b, Timestamp: time.Now()} }

// next waits for the next chunk passed on (a test that fails hangs until go test's timeout, no clock involved).
func (r *rig) next() []byte { return (<-r.out).Data }

func (r *rig) nothingYet(t *testing.T) {
	select {
	case c := <-r.out:
		t.Fatalf("passed on %d bytes while it should hold them", len(c.Data))
	default:
	}
}

// heal does what Toxiproxy does when the toxic is removed.
func (r *rig) heal() {
	r.stub.InterruptToxic()
	r.toxic.Cleanup(r.stub)
}

func TestHoldKeepsTheFrameAndWhatFollowsUntilTheHeal(t *testing.T) {
	r := start(&Toxic{Frames: "request", Action: "hold", APIKeys: []int16{26}, Count: 1})
	r.send(request(3, 12, 1, 4))
	if !bytes.Equal(r.next(), request(3, 12, 1, 4)) {
		t.Fatal("a frame of another API must pass")
	}
	r.send(request(26, 3, 2, 4))
	r.send(request(3, 12, 3, 4))
	r.stub.InterruptToxic() // a chain change: the held frame stays held
	go r.stub.Run(r.wrap)
	r.stub.InterruptToxic()
	r.nothingYet(t)
	r.toxic.Cleanup(r.stub)
	if !bytes.Equal(r.next(), request(26, 3, 2, 4)) || !bytes.Equal(r.next(), request(3, 12, 3, 4)) {
		t.Fatal("the heal must deliver the held frame, then what came behind it")
	}
}

func TestHoldReleasedByTheNextConnection(t *testing.T) {
	tx := &Toxic{Frames: "request", Action: "hold", APIKeys: []int16{26}, ReleaseOnConnect: true}
	r := start(tx)
	held := framesHeld.Load()
	r.send(request(26, 3, 2, 4))
	r.send(request(3, 12, 3, 4))
	r.in <- nil // the client gave the connection up
	r.nothingYet(t)
	waitHeld(t, held) // the next connection releases holds begun before it
	tx.newConnection()
	if !bytes.Equal(r.next(), request(26, 3, 2, 4)) || !bytes.Equal(r.next(), request(3, 12, 3, 4)) {
		t.Fatal("the next connection must release the held frame onto the old one")
	}
	if c := <-r.out; c != nil {
		t.Fatal("then the old connection closes")
	}
}

func TestDropAndDuplicate(t *testing.T) {
	r := start(&Toxic{Frames: "request", Action: "drop", APIKeys: []int16{0}, Count: 1})
	r.send(bytes.Join([][]byte{request(0, 9, 1, 8), request(0, 9, 2, 8)}, nil))
	if !bytes.Equal(r.next(), request(0, 9, 2, 8)) {
		t.Fatal("the first Produce is dropped, the second (past count) passes")
	}
	r.heal()
	d := start(&Toxic{Frames: "request", Action: "duplicate", APIKeys: []int16{0}})
	d.send(request(0, 9, 1, 8))
	if !bytes.Equal(d.next(), request(0, 9, 1, 8)) || !bytes.Equal(d.next(), request(0, 9, 1, 8)) {
		t.Fatal("a duplicated frame is written twice")
	}
	d.heal()
}

func TestResponsesOfTrackedRequests(t *testing.T) {
	var log bytes.Buffer
	firingLog = &log
	defer func() { firingLog = os.Stdout }()
	up := start(&Toxic{Proxy: "p1", Frames: "request", Action: "track", APIKeys: []int16{26}})
	down := start(&Toxic{Proxy: "p1", Frames: "response", Action: "drop"})
	up.send(bytes.Join([][]byte{request(26, 3, 41, 4), request(3, 12, 42, 4)}, nil))
	if got := up.next(); len(got) != 2*16 {
		t.Fatalf("tracking passes every request on, got %d bytes", len(got))
	}
	down.send(bytes.Join([][]byte{response(41, 6), response(42, 6)}, nil))
	if !bytes.Equal(down.next(), response(42, 6)) {
		t.Fatal("the EndTxn response (correlation id 41) is dropped, the Metadata one passes")
	}
	var fired Firing
	if err := json.Unmarshal(log.Bytes(), &fired); err != nil || fired.APIKey != 26 || fired.CorrelationID != 41 {
		t.Fatalf("the dropped response's firing names the request it answered (EndTxn, 41): %q", log.String())
	}
	down.send(response(41, 6))
	if !bytes.Equal(down.next(), response(41, 6)) {
		t.Fatal("a tracked id matches one response only")
	}
	up.heal()
	down.heal()
}

// startOn: one more connection of the same toxic (Toxiproxy gives each connection's stub a state of its own).
func startOn(t *Toxic) *rig { return start(t) }

func TestHoldReleasedAheadOfTheCountedFrameOnAnotherConnection(t *testing.T) {
	// the KAFKA-17754 shape: the first EndTxn held; its re-send on a new connection passes; the next
	// transaction's EndTxn (the second one counted) releases the held copy, which reaches the broker first
	tx := &Toxic{Frames: "request", Action: "hold", APIKeys: []int16{26}, Count: 1,
		ReleaseAfterKeys: []int16{26}, ReleaseAfterCount: 2}
	old := start(tx)
	old.send(request(26, 3, 7, 4))
	old.send(request(26, 3, 8, 4)) // behind the held frame on its own connection: not counted
	old.in <- nil                  // the client gave the connection up
	fresh := startOn(tx)
	fresh.send(request(26, 3, 1, 4)) // the re-send: past count, passes, counted once
	if !bytes.Equal(fresh.next(), request(26, 3, 1, 4)) {
		t.Fatal("the re-send must pass")
	}
	fresh.send(request(24, 3, 2, 4)) // AddPartitionsToTxn of the next transaction
	if !bytes.Equal(fresh.next(), request(24, 3, 2, 4)) {
		t.Fatal("other APIs pass")
	}
	old.nothingYet(t)
	fresh.send(request(26, 3, 3, 4)) // the next transaction's EndTxn: the second counted
	if !bytes.Equal(fresh.next(), request(26, 3, 3, 4)) {
		t.Fatal("the counting frame passes")
	}
	select { // it passed only after the held frame had gone to the old connection's writer
	case c := <-old.out:
		if !bytes.Equal(c.Data, request(26, 3, 7, 4)) {
			t.Fatal("the held EndTxn goes first")
		}
	default:
		t.Fatal("the counting frame overtook the held one")
	}
	if !bytes.Equal(old.next(), request(26, 3, 8, 4)) {
		t.Fatal("then what came behind it")
	}
	if c := <-old.out; c != nil {
		t.Fatal("then the old connection closes: it outlived its client until the release")
	}
	fresh.heal()
}

func TestHealDeliversAFrameWaitingForACount(t *testing.T) {
	tx := &Toxic{Frames: "request", Action: "hold", APIKeys: []int16{26}, Count: 1,
		ReleaseAfterKeys: []int16{24}, ReleaseAfterCount: 5}
	r := start(tx)
	r.send(request(26, 3, 7, 4))
	other := startOn(tx)
	other.send(request(24, 3, 1, 4))
	if !bytes.Equal(other.next(), request(24, 3, 1, 4)) {
		t.Fatal("a count not yet reached releases nothing, and the frame passes")
	}
	r.nothingYet(t)
	r.heal()
	if !bytes.Equal(r.next(), request(26, 3, 7, 4)) {
		t.Fatal("the heal delivers it")
	}
	if len(tx.waiting) != 0 {
		t.Fatal("a delivered frame no longer waits for the count")
	}
	other.heal()
}

// waitHeld waits until the toxic has held a frame more than `before` counted.
func waitHeld(t *testing.T, before int64) {
	for deadline := time.Now().Add(10 * time.Second); framesHeld.Load() == before; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no frame was held")
		}
	}
}

func TestClientIDsSelectTheRequestsOfThoseClientsOnly(t *testing.T) {
	tx := &Toxic{Kind: "request-drop", Frames: "request", Action: "drop", APIKeys: []int16{26},
		ClientIDs: []string{"kafka-chaos-txn-p3"}}
	r := start(tx)
	other, null := requestFrom(26, 3, 1, str("kafka-chaos-txn-p4"), 4), requestFrom(26, 3, 2, nil, 4)
	mine := requestFrom(26, 3, 3, str("kafka-chaos-txn-p3"), 4)
	lines := logged(t, func() {
		r.send(bytes.Join([][]byte{other, null, mine, request(26, 3, 4, 4)}, nil))
		if got := r.next(); !bytes.Equal(got, bytes.Join([][]byte{other, null}, nil)) {
			t.Fatalf("the other client's and a null client id's EndTxn pass, got %d bytes", len(got))
		}
		if !bytes.Equal(r.next(), request(26, 3, 4, 4)) {
			t.Fatal("the named client's EndTxn is dropped, and what follows passes")
		}
	})
	if len(lines) != 1 || lines[0].ClientID != "kafka-chaos-txn-p3" || lines[0].CorrelationID != 3 {
		t.Fatalf("want one firing, for the named client's request, got %+v", lines)
	}
	r.heal()
}

func TestResponseFaultOnTheNamedClientsRequests(t *testing.T) {
	up := start(&Toxic{Proxy: "p2", Frames: "request", Action: "track", APIKeys: []int16{26},
		ClientIDs: []string{"a"}})
	down := start(&Toxic{Proxy: "p2", Frames: "response", Action: "drop"})
	up.send(bytes.Join([][]byte{requestFrom(26, 3, 51, str("b"), 0), requestFrom(26, 3, 52, str("a"), 0)}, nil))
	up.next()
	lines := logged(t, func() {
		down.send(bytes.Join([][]byte{response(51, 2), response(52, 2)}, nil))
		if !bytes.Equal(down.next(), response(51, 2)) {
			t.Fatal("the response to client b's request passes, client a's is dropped")
		}
	})
	if len(lines) != 1 || lines[0].ClientID != "a" || lines[0].APIKey != 26 || lines[0].CorrelationID != 52 {
		t.Fatalf("the firing names the request's client and API, got %+v", lines)
	}
	up.heal()
	down.heal()
}

// logged: the firings the toxic logs while `f` runs (its log is the process's stdout).
func logged(t *testing.T, f func()) []Firing {
	var buf bytes.Buffer
	logMu.Lock()
	saved := firingLog
	firingLog = &buf
	logMu.Unlock()
	f()
	logMu.Lock()
	firingLog = saved
	text := append([]byte(nil), buf.Bytes()...)
	logMu.Unlock()
	var out []Firing
	for _, line := range bytes.Split(bytes.TrimSpace(text), []byte("\n")) {
		var fired Firing
		if len(line) > 0 && json.Unmarshal(line, &fired) == nil {
			out = append(out, fired)
		}
	}
	return out
}
