package stdcopy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

func frame(t StdType, payload string) []byte {
	h := make([]byte, 8)
	h[0] = byte(t)
	binary.BigEndian.PutUint32(h[4:], uint32(len(payload)))
	return append(h, payload...)
}

// oneByteReader returns one byte per Read, the worst case for frame reassembly.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:1]) }

func TestStdCopySplitsStreams(t *testing.T) {
	var in bytes.Buffer
	in.Write(frame(Stdout, "out1\n"))
	in.Write(frame(Stderr, "err1\n"))
	in.Write(frame(Stdin, "in-as-out\n"))
	in.Write(frame(Stdout, ""))
	in.Write(frame(Stdout, strings.Repeat("x", 100_000)))
	raw := in.Bytes()
	for name, src := range map[string]io.Reader{"whole": bytes.NewReader(raw), "bytewise": oneByteReader{bytes.NewReader(raw)}} {
		var out, errOut bytes.Buffer
		n, err := StdCopy(&out, &errOut, src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := "out1\nin-as-out\n" + strings.Repeat("x", 100_000); out.String() != want {
			t.Errorf("%s: stdout has %d bytes, want %d", name, out.Len(), len(want))
		}
		if errOut.String() != "err1\n" {
			t.Errorf("%s: stderr = %q", name, errOut.String())
		}
		if n != int64(out.Len()+errOut.Len()) {
			t.Errorf("%s: written = %d, want payload bytes %d", name, n, out.Len()+errOut.Len())
		}
	}
}

func TestStdCopySystemErrorAndUnknownStream(t *testing.T) {
	src := bytes.NewReader(append(frame(Stdout, "a"), frame(Systemerr, "log file gone")...))
	var out bytes.Buffer
	_, err := StdCopy(&out, io.Discard, src)
	if err == nil || err.Error() != "error from daemon in stream: log file gone" {
		t.Fatalf("err = %v", err)
	}
	if out.String() != "a" {
		t.Errorf("stdout before the error = %q", out.String())
	}
	_, err = StdCopy(io.Discard, io.Discard, bytes.NewReader(frame(9, "x")))
	if err == nil || err.Error() != "unrecognized stream: 9" {
		t.Fatalf("err = %v", err)
	}
}

func TestStdCopyTruncatedFrameEndsQuietly(t *testing.T) {
	raw := frame(Stdout, "complete")
	raw = append(raw, frame(Stdout, "cut short")[:10]...)
	var out bytes.Buffer
	if _, err := StdCopy(&out, io.Discard, bytes.NewReader(raw)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "complete") {
		t.Errorf("stdout = %q", out.String())
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

func TestStdCopyReadErrorIsReturned(t *testing.T) {
	if _, err := StdCopy(io.Discard, io.Discard, failingReader{}); err == nil || err.Error() != "boom" {
		t.Fatalf("err = %v", err)
	}
}

func TestStdWriterRoundTrip(t *testing.T) {
	var mux bytes.Buffer
	NewStdWriter(&mux, Stdout).Write([]byte("hello "))
	NewStdWriter(&mux, Stderr).Write([]byte("oops"))
	NewStdWriter(&mux, Stdout).Write([]byte("world"))
	var out, errOut bytes.Buffer
	if _, err := StdCopy(&out, &errOut, &mux); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hello world" || errOut.String() != "oops" {
		t.Fatalf("out=%q err=%q", out.String(), errOut.String())
	}
}
