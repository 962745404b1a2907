package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nerve-agents/nerve/workflow"
)

// liveKeepAlive is how often an idle stream sends a comment, so proxies do
// not cut it.
const liveKeepAlive = 15 * time.Second

// patch is one change the script applies to the open page: html appended
// to the element with id Append, or replacing the element with id
// Replace. The HTML is rendered here, escaped like the page.
type patch struct {
	Append  string `json:"append,omitempty"`
	Replace string `json:"replace,omitempty"`
	HTML    string `json:"html"`
	// End says the thread ended: the script closes the stream.
	End bool `json:"end,omitempty"`
}

// handleLive streams a thread's changes after ?after=SEQ as patches: each
// trace event, each new message (once its turn is answered) and the
// summary. It ends when the thread does.
func (c *Console) handleLive(w http.ResponseWriter, r *http.Request, _ user) {
	id := r.PathValue("id")
	if !workflow.IsThreadID(id) {
		http.Error(w, fmt.Sprintf("%q is not a thread id (thread-N)", id), http.StatusBadRequest)
		return
	}
	after, err := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		after, err = strconv.ParseUint(v, 10, 64)
	}
	if err != nil {
		http.Error(w, "after: want the seq of the last event shown", http.StatusBadRequest)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()

	tmpl := pages()["thread"]
	var buf bytes.Buffer
	send := func(seq uint64, p patch) error {
		data, _ := json.Marshal(p)
		if seq > 0 {
			fmt.Fprintf(&buf, "id: %d\n", seq)
		}
		fmt.Fprintf(&buf, "data: %s\n\n", data)
		return nil
	}
	html := func(name string, v any) string {
		var b bytes.Buffer
		if err := tmpl.ExecuteTemplate(&b, name, v); err != nil {
			c.log.Error("console live template failed", "template", name, "err", err)
		}
		return b.String()
	}
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		_, err := w.Write(buf.Bytes())
		buf.Reset()
		if err == nil {
			err = rc.Flush()
		}
		return err
	}
	// Events come one at a time; what they change is read once per
	// batch the source hands over (flushed when it pauses).
	events := make(chan workflow.Event, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.src.Follow(r.Context(), id, after, func(e workflow.Event) error {
			select {
			case events <- e:
				return nil
			case <-r.Context().Done():
				return r.Context().Err()
			}
		})
		close(events)
	}()
	keep := time.NewTicker(liveKeepAlive)
	defer keep.Stop()
	for {
		var batch []workflow.Event
		select {
		case e, ok := <-events:
			if !ok {
				<-done
				return
			}
			batch = append(batch, e)
		drain:
			for {
				select {
				case e, ok := <-events:
					if !ok {
						break drain
					}
					batch = append(batch, e)
				default:
					break drain
				}
			}
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			continue
		case <-r.Context().Done():
			return
		}
		if err := c.sendBatch(r, id, batch, html, send); err != nil || flush() != nil {
			return
		}
	}
}

// sendBatch turns events into patches: the events for the trace, then,
// from one read of the thread, the messages of answered turns and the
// summary.
func (c *Console) sendBatch(r *http.Request, id string, batch []workflow.Event, html func(string, any) string, send func(uint64, patch) error) error {
	steps := map[int]bool{}
	ended := false
	for _, e := range batch {
		_ = send(e.Seq, patch{Append: "trace", HTML: html("event", e)})
		if e.Type == workflow.EventTurnAnswered || e.Type == workflow.EventTurnFailed {
			steps[e.Step] = true
		}
		ended = ended || e.Type == workflow.EventThreadEnded
	}
	t, err := c.src.Thread(r.Context(), id)
	if err != nil {
		return err
	}
	for _, m := range t.Messages {
		if steps[m.Step] {
			_ = send(0, patch{Append: "messages", HTML: html("message", m)})
		}
	}
	return send(0, patch{Replace: "summary", HTML: html("summary", t), End: ended})
}

// countsEvery is how often the list's live counts are read again.
const countsEvery = 2 * time.Second

// handleLiveCounts streams the threads list's status counts, each time
// they change.
func (c *Console) handleLiveCounts(w http.ResponseWriter, r *http.Request, _ user) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	var last Counts
	first := true
	tick := time.NewTicker(countsEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		}
		p, err := c.src.Threads(r.Context(), ThreadFilter{Page: 1, PerPage: 1})
		if err != nil {
			return
		}
		if first || p.Counts != last {
			var b bytes.Buffer
			if err := pages()["threads"].ExecuteTemplate(&b, "counts", p.Counts); err != nil {
				return
			}
			data, _ := json.Marshal(patch{Replace: "counts", HTML: b.String()})
			if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil || rc.Flush() != nil {
				return
			}
			last, first = p.Counts, false
		}
	}
}
