// Package kafka is a Toxiproxy toxic that understands Kafka's framing: it picks out the requests (or the
// responses) of chosen API keys on a stream and delays, holds, drops or duplicates them, leaving every other
// byte as it was.
package kafka

import "encoding/binary"

// Header is what the toxic reads of one frame. A request frame is a 4-byte big-endian size, then the request
// header (api_key int16, api_version int16, correlation_id int32, client_id …); a response frame is the size,
// then the correlation id of the request it answers (the API key and client id are known only from that
// request).
type Header struct {
	Size          int32
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	// ClientID: the request header's client_id (v1 and the flexible v2 both carry it right after the
	// correlation id, as a nullable string with an int16 length, before v2's tagged fields); "" when null or
	// when the frame is too short to hold it (header v0, only ControlledShutdown v0, has none) or it is longer
	// than maxClientID.
	ClientID string
}

// Piece is a run of bytes to pass on in stream order: Frame is set when it is one whole matched frame.
type Piece struct {
	Data  []byte
	Frame *Header
}

// maxClientID bounds the client id the parser waits for before it decides on a frame, so that an unmatched
// frame still passes at once: a longer one (Kafka sets no limit; kafka-chaos's are short) reads as "".
const maxClientID = 1024

// maxFrame bounds what is taken for a size prefix; Kafka's socket.request.max.bytes defaults to 100 MiB.
const maxFrame = 100 << 20

// Parser splits one direction of one connection into frames, across chunks. Only matched frames are buffered
// whole; every other frame passes through as its bytes arrive, so large Fetch responses are not held up.
type Parser struct {
	Requests bool
	// OutOfStep: the stream is joined somewhere past its start (a toxic added to an open connection), so the
	// first chunk may begin mid-frame.
	OutOfStep bool
	buf       []byte  // the header (or the whole matched frame) read so far
	cur       *Header // the matched frame being buffered
	skip      int     // bytes of a passing frame still to come
}

func (p *Parser) headerLen() int {
	if p.Requests {
		return 12
	}
	return 8
}

// need is how many bytes of a frame's start the parser reads before it decides on the frame: the fixed header,
// then for a request the client id's length, then the client id itself when the frame holds it. `b` is what it
// has read so far; a header that cannot be one needs no more.
func (p *Parser) need(b []byte) int {
	hl := p.headerLen()
	if !p.Requests || len(b) < hl {
		return hl
	}
	if _, ok := p.parse(b[:hl]); !ok {
		return hl
	}
	size := int(int32(binary.BigEndian.Uint32(b)))
	if size+4 < hl+2 {
		return hl
	}
	if len(b) < hl+2 {
		return hl + 2
	}
	n := int(int16(binary.BigEndian.Uint16(b[hl:])))
	if n <= 0 || n > maxClientID || hl+2+n > size+4 {
		return hl + 2
	}
	return hl + 2 + n
}

func (p *Parser) parse(b []byte) (Header, bool) {
	h := Header{Size: int32(binary.BigEndian.Uint32(b))}
	if p.Requests {
		h.APIKey = int16(binary.BigEndian.Uint16(b[4:]))
		h.APIVersion = int16(binary.BigEndian.Uint16(b[6:]))
		h.CorrelationID = int32(binary.BigEndian.Uint32(b[8:]))
		if len(b) >= 14 {
			n := int(int16(binary.BigEndian.Uint16(b[12:])))
			if n > 0 && n <= maxClientID && 14+n <= len(b) && 14+n <= int(h.Size)+4 {
				h.ClientID = string(b[14 : 14+n])
			}
		}
	} else {
		h.APIKey = -1
		h.CorrelationID = int32(binary.BigEndian.Uint32(b[4:]))
	}
	ok := h.Size >= int32(p.headerLen()-4) && h.Size <= maxFrame
	if p.Requests {
		ok = ok && h.APIKey >= 0 && h.APIKey < 1000 && h.APIVersion >= 0 && h.APIVersion < 100
	}
	return h, ok
}

// Feed takes the next chunk of the stream and returns what can be passed on now, in order. `match` is asked
// once per frame, when its header is complete.
//
// A toxic added to a connection that is already open may start reading in the middle of a frame. Until a
// chunk starts with a plausible header such a parser is out of step and passes whole chunks through untouched;
// a header that cannot be one (a size past 100 MiB, an unknown API key) puts it out of step again. Bytes are
// never changed either way: being out of step only means frames are not seen.
func (p *Parser) Feed(data []byte, match func(Header) bool) []Piece {
	var out []Piece
	var pass []byte
	emit := func() {
		if len(pass) > 0 {
			out = append(out, Piece{Data: pass})
			pass = nil
		}
	}
	hl := p.headerLen()
	if p.OutOfStep {
		if len(data) >= hl {
			_, ok := p.parse(data)
			p.OutOfStep = !ok
		}
		if p.OutOfStep {
			return []Piece{{Data: data}}
		}
	}
	for i := 0; i < len(data); {
		if p.skip > 0 {
			n := min(p.skip, len(data)-i)
			pass = append(pass, data[i:i+n]...)
			p.skip -= n
			i += n
			continue
		}
		if p.cur == nil {
			for need := p.need(p.buf); len(p.buf) < need && i < len(data); need = p.need(p.buf) {
				n := min(need-len(p.buf), len(data)-i)
				p.buf = append(p.buf, data[i:i+n]...)
				i += n
			}
			if len(p.buf) < p.need(p.buf) {
				break
			}
			h, ok := p.parse(p.buf)
			if !ok {
				pass = append(pass, p.buf...)
				pass = append(pass, data[i:]...)
				p.buf, p.OutOfStep = nil, true
				break
			}
			if !match(h) {
				pass = append(pass, p.buf...)
				p.skip = int(h.Size) + 4 - len(p.buf)
				p.buf = nil
				continue
			}
			p.cur = &h
		}
		total := int(p.cur.Size) + 4
		n := min(total-len(p.buf), len(data)-i)
		p.buf = append(p.buf, data[i:i+n]...)
		i += n
		if len(p.buf) == total {
			emit()
			out = append(out, Piece{Data: p.buf, Frame: p.cur})
			p.buf, p.cur = nil, nil
		}
	}
	emit()
	return out
}

// Pending is what the parser still holds back (a header not yet complete, or part of a matched frame): the
// bytes to pass on when the toxic goes away mid-frame.
func (p *Parser) Pending() []byte {
	b := p.buf
	p.buf, p.cur = nil, nil
	p.OutOfStep = true
	return b
}
