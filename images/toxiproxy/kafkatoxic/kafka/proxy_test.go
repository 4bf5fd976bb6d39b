package kafka

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/Shopify/toxiproxy/v2"
)

// fakeBroker answers every request frame with a response frame carrying its correlation id; an EndTxn's answer
// waits until `release` is closed, and `gotEndTxn` says the EndTxn arrived.
func fakeBroker(t *testing.T, gotEndTxn, release chan struct{}) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				hdr := make([]byte, 12)
				for {
					if _, err := io.ReadFull(c, hdr); err != nil {
						return
					}
					rest := make([]byte, int(binary.BigEndian.Uint32(hdr))-8)
					if _, err := io.ReadFull(c, rest); err != nil {
						return
					}
					if binary.BigEndian.Uint16(hdr[4:]) == 26 {
						close(gotEndTxn)
						<-release
					}
					if _, err := c.Write(response(int32(binary.BigEndian.Uint32(hdr[8:])), 2)); err != nil {
						return
					}
				}
			}(c)
		}
	}()
	return ln
}

// startProxy starts a Toxiproxy proxy named broker-1 in front of the listener.
func startProxy(t *testing.T, ln net.Listener) *toxiproxy.Proxy {
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "broker-1", "127.0.0.1:0", ln.Addr().String())
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func addToxic(t *testing.T, p *toxiproxy.Proxy, name, stream string, toxic *Toxic) {
	body, _ := json.Marshal(map[string]interface{}{"name": name, "type": "kafka", "stream": stream, "attributes": toxic})
	if _, err := p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
}

func readResponse(t *testing.T, c net.Conn) int32 {
	b := make([]byte, 10)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	return int32(binary.BigEndian.Uint32(b[4:]))
}

// Two connections of one proxy number their requests alike (as librdkafka does, from 1 per connection): a
// response fault on EndTxn drops the EndTxn response of the connection that sent EndTxn, not the response
// to the other connection's request with the same correlation id.
func TestResponseFaultPairsTheDirectionsOfEachConnection(t *testing.T) {
	gotEndTxn, release := make(chan struct{}), make(chan struct{})
	ln := fakeBroker(t, gotEndTxn, release)
	defer ln.Close()
	p := startProxy(t, ln)
	defer p.Stop()
	addToxic(t, p, "track", "upstream", &Toxic{Kind: "response-drop", Fault: "f1", Proxy: "broker-1",
		APIKeys: []int16{26}, Frames: "request", Action: "track"})
	addToxic(t, p, "drop", "downstream", &Toxic{Kind: "response-drop", Fault: "f1", Proxy: "broker-1",
		APIKeys: []int16{26}, Frames: "response", Action: "drop"})

	coordinator, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer coordinator.Close()
	other, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// the EndTxn (id 6) is tracked; before its answer, the other connection's request 6 is answered
	if _, err := coordinator.Write(request(26, 3, 6, 4)); err != nil {
		t.Fatal(err)
	}
	<-gotEndTxn
	if _, err := other.Write(request(3, 12, 6, 4)); err != nil {
		t.Fatal(err)
	}
	if got := readResponse(t, other); got != 6 {
		t.Fatalf("the other connection's response with the same id passes; got %d", got)
	}
	close(release)
	if _, err := coordinator.Write(request(3, 12, 7, 4)); err != nil {
		t.Fatal(err)
	}
	if got := readResponse(t, coordinator); got != 7 {
		t.Fatalf("the EndTxn response (6) is dropped and the next one (7) arrives; got %d", got)
	}
}

// A held EndTxn stays on its connection, after the client gave that connection up, until the proxy's next
// connection opens: then it reaches the broker (the request delivered after its sender moved on).
func TestHoldReleasedByTheProxysNextConnection(t *testing.T) {
	gotEndTxn, release := make(chan struct{}), make(chan struct{})
	close(release)
	ln := fakeBroker(t, gotEndTxn, release)
	defer ln.Close()
	p := startProxy(t, ln)
	defer p.Stop()
	addToxic(t, p, "hold", "upstream", &Toxic{Kind: "request-hold", Fault: "f2", Proxy: "broker-1",
		APIKeys: []int16{26}, Frames: "request", Action: "hold", Count: 1, ReleaseOnConnect: true})
	first, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Write(request(3, 12, 1, 4)); err != nil {
		t.Fatal(err)
	}
	if got := readResponse(t, first); got != 1 {
		t.Fatalf("want the Metadata response first, got %d", got)
	}
	held := framesHeld.Load()
	if _, err := first.Write(request(26, 3, 2, 4)); err != nil {
		t.Fatal(err)
	}
	first.Close()
	waitHeld(t, held) // the next connection releases holds begun before it: wait until the toxic took the EndTxn
	select {
	case <-gotEndTxn:
		t.Fatal("the EndTxn should be held until the next connection")
	default:
	}
	second, err := net.Dial("tcp", p.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	<-gotEndTxn // released by the new connection (a hang here is the failure)
}
