// The NICache benchmark's origin: a "dynamic content" HTTP server that spends a fixed CPU time
// on every response (SHA-256 over a buffer, on the worker's own OS thread, until that thread's
// CPU clock has advanced by -burn), with a fixed number of workers so its capacity is defined.
//
//	GET /c<percent>/<i>  -> 200, -size bytes; Cache-Control: max-age=86400 if i < percent*n/100,
//	                        else no-store (the URL says which runs it belongs to: no restarts)
//	GET /stats           -> "requests <responses generated so far>\ninflight <being generated or
//	                        waiting for a worker>" (no CPU burned)
//
// Built and started by bench/nicache/run.sh (go build; standard library only, Go >= 1.19).
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

var (
	addr    = flag.String("addr", "127.0.0.1:18310", "listen address")
	burn    = flag.Duration("burn", 2*time.Millisecond, "CPU time spent per response")
	workers = flag.Int("workers", 1, "responses generated at once (each on its own OS thread)")
	n       = flag.Int("n", 1000, "URLs per cacheability level (/c<p>/0 .. /c<p>/<n-1>)")
	size    = flag.Int("size", 4096, "body bytes")
)

const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID

func threadCPU() time.Duration {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		log.Fatalf("clock_gettime(CLOCK_THREAD_CPUTIME_ID): %v", e)
	}
	return time.Duration(ts.Nano())
}

// work burns *burn of this OS thread's CPU time and returns a digest of what it hashed, so the
// body depends on the work (nothing can be optimised away).
func work(seed uint64) [32]byte {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var buf [1024]byte
	binary.LittleEndian.PutUint64(buf[:], seed)
	sum := sha256.Sum256(buf[:])
	start := threadCPU()
	for {
		for i := 0; i < 16; i++ { // ~16 x 3-4 us between clock reads
			copy(buf[:], sum[:])
			sum = sha256.Sum256(buf[:])
		}
		if threadCPU()-start >= *burn {
			return sum
		}
	}
}

func main() {
	flag.Parse()
	sem := make(chan struct{}, *workers)
	var served, inflight atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "requests %d\ninflight %d\n", served.Load(), inflight.Load())
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// /c<percent>/<i>
		ok := strings.HasPrefix(r.URL.Path, "/c")
		p, is, ok2 := strings.Cut(strings.TrimPrefix(r.URL.Path, "/c"), "/")
		percent, err1 := strconv.Atoi(p)
		i, err2 := strconv.Atoi(is)
		if !ok || !ok2 || err1 != nil || err2 != nil || percent < 0 || percent > 100 || i < 0 || i >= *n {
			http.Error(w, "want /c<percent>/<i>", http.StatusNotFound)
			return
		}
		inflight.Add(1)
		sem <- struct{}{}
		digest := work(uint64(percent)<<32 | uint64(i))
		<-sem
		served.Add(1)
		inflight.Add(-1)
		body := make([]byte, *size)
		for off := 0; off < len(body); off += copy(body[off:], digest[:]) {
		}
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		if i*100 < percent**n {
			h.Set("Cache-Control", "max-age=86400")
		} else {
			h.Set("Cache-Control", "no-store")
		}
		if r.Method != http.MethodHead {
			w.Write(body)
		}
	})
	srv := &http.Server{Addr: *addr, Handler: mux, IdleTimeout: 300 * time.Second}
	log.Printf("origin on %s: %v CPU per response, %d worker(s), n=%d, %d-byte bodies", *addr, *burn, *workers, *n, *size)
	log.Fatal(srv.ListenAndServe())
}
