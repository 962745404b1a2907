package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/nerve-agents/nerve/workflow"
)

var (
	// bucketAnswers holds people's answers to human turns, one sub-bucket
	// per thread keyed by step, until the engine stores them as messages.
	bucketAnswers = []byte("answers")
	// bucketChildren indexes child threads: one sub-bucket per parent,
	// keyed by the waiting step (0: started by an agent) and the child's id.
	bucketChildren = []byte("children")
)

// AnswerConflict is an answer to a turn that does not wait for one: the
// thread ended, the step is not pending, or it was answered already.
type AnswerConflict struct{ Reason string }

func (e *AnswerConflict) Error() string { return e.Reason }

// ExitCode: the answer is refused, as a remote's 409 is.
func (e *AnswerConflict) ExitCode() int { return 1 }

// RecordAnswer stores a person's answer to a pending turn of a thread,
// once, durably: when it returns nil the answer survives a crash, and the
// thread's engine takes it (Answer) and records it as the step's message.
func (s *Store) RecordAnswer(thread string, m workflow.Message) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketThreads).Get([]byte(thread))
		if raw == nil {
			return ErrNotFound
		}
		var t workflow.Thread
		if err := json.Unmarshal(raw, &t); err != nil {
			return err
		}
		if t.Ended() {
			return &AnswerConflict{fmt.Sprintf("%s already ended (%s): nothing waits for an answer", thread, t.Status)}
		}
		if !slices.ContainsFunc(t.Pending, func(p workflow.Turn) bool { return p.Step == m.Step }) {
			return &AnswerConflict{fmt.Sprintf("step %d of %s is not waiting for an answer", m.Step, thread)}
		}
		if mb := tx.Bucket(bucketMessages).Bucket([]byte(thread)); mb != nil && mb.Get(u64(uint64(m.Step))) != nil {
			return &AnswerConflict{fmt.Sprintf("step %d of %s was already answered", m.Step, thread)}
		}
		ab, err := tx.Bucket(bucketAnswers).CreateBucketIfNotExists([]byte(thread))
		if err != nil {
			return err
		}
		if ab.Get(u64(uint64(m.Step))) != nil {
			return &AnswerConflict{fmt.Sprintf("step %d of %s was already answered", m.Step, thread)}
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return ab.Put(u64(uint64(m.Step)), b)
	})
	if err == nil {
		s.wake(thread)
	}
	return err
}

// Answer returns the answer recorded for a thread's step, nil when none.
func (s *Store) Answer(thread string, step int) (*workflow.Message, error) {
	var m *workflow.Message
	err := s.db.View(func(tx *bolt.Tx) error {
		ab := tx.Bucket(bucketAnswers).Bucket([]byte(thread))
		if ab == nil {
			return nil
		}
		raw := ab.Get(u64(uint64(step)))
		if raw == nil {
			return nil
		}
		m = new(workflow.Message)
		return json.Unmarshal(raw, m)
	})
	return m, err
}

// indexChild records t, a child thread, under its parent with a
// child.started event in the parent's trace; in the transaction that
// creates it, so a parent that resumes after a crash finds the child it
// started rather than starting another.
func indexChild(tx *bolt.Tx, t *workflow.Thread) error {
	if t.Parent == nil {
		return nil
	}
	b, err := tx.Bucket(bucketChildren).CreateBucketIfNotExists([]byte(t.Parent.Thread))
	if err != nil {
		return err
	}
	if err := b.Put(append(u64(uint64(t.Parent.Step)), t.ID...), nil); err != nil {
		return err
	}
	return putEvents(tx, t.Parent.Thread, []workflow.Event{{Type: workflow.EventChildStarted, Step: t.Parent.ChildEventStep(),
		Message: workflow.Ref{Workflow: t.Workflow, Thread: t.ID}.String(), At: t.CreatedAt}})
}

// Child is a child thread of parent: its id and the step waiting for it.
type Child struct {
	ID   string
	Step int
}

// Children lists a thread's children in the order they were started at
// each step (steps ascending).
func (s *Store) Children(parent string) ([]Child, error) {
	var out []Child
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChildren).Bucket([]byte(parent))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			if len(k) <= 8 {
				return errors.New("malformed child index key")
			}
			out = append(out, Child{ID: string(k[8:]), Step: int(beUint64(k[:8]))})
			return nil
		})
	})
	sortChildren(out)
	return out, err
}

// ChildAt returns the child a parent's step waits for, "" when none has
// been started.
func (s *Store) ChildAt(parent string, step int) (string, error) {
	cs, err := s.Children(parent)
	for _, c := range cs {
		if c.Step == step && step > 0 {
			return c.ID, err
		}
	}
	return "", err
}
