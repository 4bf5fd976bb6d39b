package kafka

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

func request(key, version int16, corr int32, body int) []byte {
	b := make([]byte, 12+body)
	binary.BigEndian.PutUint32(b, uint32(8+body))
	binary.BigEndian.PutUint16(b[4:], uint16(key))
	binary.BigEndian.PutUint16(b[6:], uint16(version))
	binary.BigEndian.PutUint32(b[8:], uint32(corr))
	for i := 12; i < len(b); i++ {
		b[i] = byte(i)
	}
	return b
}

// requestFrom: a request whose header carries a client id (v1 and flexible v2 alike: a nullable string with an
// int16 length right after the correlation id; nil writes a null one), then `body` bytes.
func requestFrom(key, version int16, corr int32, client *string, body int) []byte {
	var id []byte
	length := -1
	if client != nil {
		id, length = []byte(*client), len(*client)
	}
	b := make([]byte, 14+len(id)+body)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	binary.BigEndian.PutUint16(b[4:], uint16(key))
	binary.BigEndian.PutUint16(b[6:], uint16(version))
	binary.BigEndian.PutUint32(b[8:], uint32(corr))
	binary.BigEndian.PutUint16(b[12:], uint16(int16(length)))
	copy(b[14:], id)
	return b
}

func str(s string) *string { return &s }

func response(corr int32, body int) []byte {
	b := make([]byte, 8+body)
	binary.BigEndian.PutUint32(b, uint32(4+body))
	binary.BigEndian.PutUint32(b[4:], uint32(corr))
	return b
}

// feed runs a stream through a parser in the given chunks; returns the bytes passed on and the matched frames.
func feed(p *Parser, chunks [][]byte, match func(Header) bool) ([]byte, []Piece) {
	var out []byte
	var frames []Piece
	for _, c := range chunks {
		for _, piece := range p.Feed(c, match) {
			out = append(out, piece.Data...)
			if piece.Frame != nil {
				frames = append(frames, piece)
			}
		}
	}
	return out, frames
}

func split(b []byte, sizes ...int) [][]byte {
	var out [][]byte
	for _, n := range sizes {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

func keyIs(k int16) func(Header) bool { return func(h Header) bool { return h.APIKey == k } }

func TestSeveralFramesInOneChunk(t *testing.T) {
	stream := bytes.Join([][]byte{request(3, 12, 1, 20), request(26, 3, 2, 5), request(0, 9, 3, 40)}, nil)
	out, frames := feed(&Parser{Requests: true}, [][]byte{stream}, keyIs(26))
	if !bytes.Equal(out, stream) {
		t.Fatalf("stream changed")
	}
	if len(frames) != 1 || frames[0].Frame.CorrelationID != 2 || frames[0].Frame.APIVersion != 3 ||
		!bytes.Equal(frames[0].Data, request(26, 3, 2, 5)) {
		t.Fatalf("want the EndTxn frame with correlation id 2, got %+v", frames)
	}
}

func TestFramesSplitAcrossChunks(t *testing.T) {
	a, b, c := request(26, 3, 7, 30), request(0, 9, 8, 100), request(26, 3, 9, 1)
	stream := bytes.Join([][]byte{a, b, c}, nil)
	// a cut inside the size prefix, inside the header, inside the body, and one byte at a time
	for _, chunks := range [][][]byte{
		split(stream, 2, 7, 30, 50),
		split(stream, len(a)+11, 1),
		split(stream, len(a)-1, len(b)+2),
	} {
		out, frames := feed(&Parser{Requests: true}, chunks, keyIs(26))
		if !bytes.Equal(out, stream) {
			t.Fatalf("stream changed")
		}
		if len(frames) != 2 || !bytes.Equal(frames[0].Data, a) || !bytes.Equal(frames[1].Data, c) {
			t.Fatalf("want the two EndTxn frames whole, got %d", len(frames))
		}
	}
	var bytewise [][]byte
	for i := range stream {
		bytewise = append(bytewise, stream[i:i+1])
	}
	if _, frames := feed(&Parser{Requests: true}, bytewise, keyIs(0)); len(frames) != 1 || frames[0].Frame.CorrelationID != 8 {
		t.Fatalf("byte-at-a-time: want the Produce frame, got %+v", frames)
	}
}

func TestPassingFrameIsNotHeldBack(t *testing.T) {
	big := request(1, 16, 4, 5000)
	p := &Parser{Requests: true}
	pieces := p.Feed(big[:100], keyIs(26))
	if len(pieces) != 1 || !bytes.Equal(pieces[0].Data, big[:100]) {
		t.Fatalf("an unmatched frame's first bytes should pass at once, got %d pieces", len(pieces))
	}
	next := request(26, 3, 5, 0)
	out, frames := feed(p, [][]byte{big[100:], next}, keyIs(26))
	if !bytes.Equal(out, append(append([]byte{}, big[100:]...), next...)) || len(frames) != 1 {
		t.Fatalf("the frame after the big one was not found")
	}
}

func TestClientIDOfARequestCutAnywhere(t *testing.T) {
	a := requestFrom(26, 4, 7, str("kafka-chaos-txn-p3"), 20)
	b := requestFrom(0, 9, 8, nil, 5)
	c := requestFrom(26, 5, 9, str("x"), 0) // EndTxn v5: the flexible header v2, same client_id layout
	stream := bytes.Join([][]byte{a, b, c}, nil)
	for cut := 1; cut < len(stream); cut++ {
		var got []Header
		out, _ := feed(&Parser{Requests: true}, split(stream, cut), func(h Header) bool { got = append(got, h); return false })
		if !bytes.Equal(out, stream) {
			t.Fatalf("cut at %d: stream changed", cut)
		}
		if len(got) != 3 || got[0].ClientID != "kafka-chaos-txn-p3" || got[1].ClientID != "" || got[2].ClientID != "x" ||
			got[0].CorrelationID != 7 || got[2].CorrelationID != 9 {
			t.Fatalf("cut at %d: want client ids kafka-chaos-txn-p3, null, x; got %+v", cut, got)
		}
	}
}

func TestAClientIDPastItsFrameIsNotRead(t *testing.T) {
	short := request(26, 3, 1, 2) // a length field (0x0c0d) far past the frame's end
	next := requestFrom(26, 3, 2, str("p"), 0)
	var got []Header
	out, _ := feed(&Parser{Requests: true}, [][]byte{short, next}, func(h Header) bool { got = append(got, h); return false })
	if !bytes.Equal(out, append(append([]byte{}, short...), next...)) || len(got) != 2 || got[0].ClientID != "" ||
		got[1].ClientID != "p" {
		t.Fatalf("want no client id for the short frame and the next frame found, got %+v", got)
	}
}

func TestResponsesByCorrelationID(t *testing.T) {
	stream := bytes.Join([][]byte{response(1, 10), response(2, 3), response(3, 0)}, nil)
	_, frames := feed(&Parser{}, split(stream, 5, 9), func(h Header) bool { return h.CorrelationID == 2 })
	if len(frames) != 1 || !bytes.Equal(frames[0].Data, response(2, 3)) {
		t.Fatalf("want the response to correlation id 2, got %+v", frames)
	}
}

func TestOutOfStepUntilAChunkStartsAFrame(t *testing.T) {
	first := request(26, 3, 1, 64)
	later := request(26, 3, 2, 0)
	p := &Parser{Requests: true, OutOfStep: true}
	// joined mid-frame: the rest of `first` is no header (its size would be past 100 MiB)
	rest := append([]byte{0xff, 0xff}, first[14:]...)
	out, frames := feed(p, [][]byte{rest, later}, keyIs(26))
	if !bytes.Equal(out, append(append([]byte{}, rest...), later...)) {
		t.Fatalf("stream changed")
	}
	if len(frames) != 1 || frames[0].Frame.CorrelationID != 2 {
		t.Fatalf("want only the frame of the chunk that starts one, got %+v", frames)
	}
}

func TestPendingGivesBackAPartFrame(t *testing.T) {
	f := request(26, 3, 1, 64)
	p := &Parser{Requests: true}
	out, _ := feed(p, [][]byte{f[:30]}, keyIs(26))
	if len(out) != 0 || !bytes.Equal(p.Pending(), f[:30]) {
		t.Fatalf("the part of a matched frame must be held, then given back")
	}
}

// Real client traffic: what a librdkafka transactional producer sent to one broker of a real cluster,
// captured through a relay by tests/integration/test_kafka_toxic.py (one file per connection).
func TestRealKafkaRequests(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.requests")
	if len(files) == 0 {
		t.Fatal("no captured requests in testdata/")
	}
	seen := map[int16]int{}
	for _, f := range files {
		stream, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var whole []Header
		_, frames := feed(&Parser{Requests: true}, [][]byte{stream}, func(h Header) bool { whole = append(whole, h); return true })
		total := 0
		for _, fr := range frames {
			total += len(fr.Data)
			seen[fr.Frame.APIKey]++
			if fr.Frame.ClientID != "kafka-chaos-capture" { // the capturing producer's client.id
				t.Fatalf("%s: frame %+v: want client id kafka-chaos-capture", f, *fr.Frame)
			}
		}
		if total != len(stream) {
			t.Fatalf("%s: frames cover %d of %d bytes", f, total, len(stream))
		}
		rng := rand.New(rand.NewSource(1))
		for round := 0; round < 20; round++ {
			var chunks [][]byte
			for rest := stream; len(rest) > 0; {
				n := min(1+rng.Intn(200), len(rest))
				chunks = append(chunks, rest[:n])
				rest = rest[n:]
			}
			var got []Header
			out, _ := feed(&Parser{Requests: true}, chunks, func(h Header) bool { got = append(got, h); return round%2 == 0 })
			if !bytes.Equal(out, stream) || len(got) != len(whole) {
				t.Fatalf("%s: random chunks parse %d frames, whole %d", f, len(got), len(whole))
			}
			for i := range got {
				if got[i] != whole[i] {
					t.Fatalf("%s: frame %d differs: %+v vs %+v", f, i, got[i], whole[i])
				}
			}
		}
	}
	for _, key := range []int16{18, 3, 0} { // ApiVersions, Metadata, Produce
		if seen[key] == 0 {
			t.Fatalf("api key %d not in the captured traffic: %v", key, seen)
		}
	}
	if seen[22]+seen[24]+seen[26] == 0 { // InitProducerId, AddPartitionsToTxn, EndTxn (on the coordinator)
		t.Fatalf("no transaction request in the captured traffic: %v", seen)
	}
}
