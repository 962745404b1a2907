package daemon

import (
	"encoding/json"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// terminateSignal is what `daemon stop` (and POST /v1/shutdown) delivers.
const terminateSignal = syscall.SIGTERM

// handleEvents streams a thread's events as JSON lines. With follow=1 it
// waits for news until the thread ends, so `workflow run` and `logs -f`
// show progress as it happens without polling.
func (d *Daemon) handleEvents(w http.ResponseWriter, r *http.Request) {
	t := d.thread(w, r)
	if t == nil {
		return
	}
	after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	follow := r.URL.Query().Get("follow") == "1"
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	for {
		// Take the wake-up channel before reading, so a commit between the
		// read and the wait is not missed.
		changed := d.store.Changed(t.ID)
		evs, err := d.store.Events(t.ID, after)
		if err != nil {
			return
		}
		for _, e := range evs {
			if enc.Encode(e) != nil {
				return
			}
			after = e.Seq
		}
		if flusher != nil {
			flusher.Flush()
		}
		cur, err := d.store.Thread(t.ID)
		if err != nil || !follow {
			return
		}
		if cur.Ended() {
			// The end event is committed with the status; one more read
			// catches it if it landed after ours.
			if more, _ := d.store.Events(t.ID, after); len(more) == 0 {
				return
			}
			continue
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}
