package khala

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// AddEnrollToken implements Storage.
func (b *Bolt) AddEnrollToken(ctx context.Context, t EnrollToken) error {
	return b.update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bEnroll), t.Hash[:], t)
	})
}

// Enroll implements Storage.
func (b *Bolt) Enroll(ctx context.Context, enroll Hash, a Agent) error {
	var result error
	err := b.update(func(tx *bolt.Tx) error {
		result = nil
		eb := tx.Bucket(bEnroll)
		var et EnrollToken
		ok, err := getJSON(eb, enroll[:], &et)
		switch {
		case err != nil:
			return err
		case !ok || !sameHash(et.Hash, enroll):
			result = ErrUnauthorized
			return nil
		case !et.ExpiresAt.IsZero() && !a.EnrolledAt.Before(et.ExpiresAt):
			result = fmt.Errorf("%w: enrollment token expired at %s", ErrUnauthorized, et.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		case et.Uses <= 0:
			result = fmt.Errorf("%w: enrollment token has been used up", ErrUnauthorized)
			return nil
		}
		agents := tx.Bucket(bAgents)
		if agents.Get([]byte(a.Name)) != nil {
			result = ErrNameTaken
			return nil
		}
		et.Uses--
		if err := putJSON(eb, enroll[:], et); err != nil {
			return err
		}
		if err := putJSON(agents, []byte(a.Name), a); err != nil {
			return err
		}
		return tx.Bucket(bTokens).Put(a.Token[:], []byte(a.Name))
	})
	if err != nil {
		return err
	}
	return result
}

// AgentByToken implements Storage.
// Known agents are cached (see agentCache): every request authenticates.
func (b *Bolt) AgentByToken(ctx context.Context, h Hash) (Agent, error) {
	if a, ok := b.agents.get(h); ok {
		return a, nil
	}
	var a Agent
	err := b.view(ctx, func(tx *bolt.Tx) error {
		name := tx.Bucket(bTokens).Get(h[:])
		if name == nil {
			return ErrUnauthorized
		}
		ok, err := getJSON(tx.Bucket(bAgents), name, &a)
		if err != nil {
			return err
		}
		if !ok || !sameHash(a.Token, h) {
			return ErrUnauthorized
		}
		return nil
	})
	if err == nil {
		b.agents.put(h, a)
	}
	return a, err
}

// PutWorkflow implements Storage.
func (b *Bolt) PutWorkflow(ctx context.Context, w WorkflowRecord, source []byte) (bool, error) {
	var created bool
	err := b.update(func(tx *bolt.Tx) error {
		wb := tx.Bucket(bWorkflows)
		created = wb.Get([]byte(w.Name)) == nil
		if err := tx.Bucket(bSources).Put([]byte(w.SourceHash), source); err != nil {
			return err
		}
		return putJSON(wb, []byte(w.Name), w)
	})
	return created, err
}

// Workflow implements Storage.
func (b *Bolt) Workflow(ctx context.Context, name string) (WorkflowRecord, error) {
	var w WorkflowRecord
	err := b.view(ctx, func(tx *bolt.Tx) error {
		ok, err := getJSON(tx.Bucket(bWorkflows), []byte(name), &w)
		if err == nil && !ok {
			err = ErrNotFound
		}
		return err
	})
	return w, err
}

// Workflows implements Storage.
func (b *Bolt) Workflows(ctx context.Context) ([]WorkflowRecord, error) {
	var out []WorkflowRecord
	err := b.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bWorkflows).ForEach(func(k, v []byte) error {
			var w WorkflowRecord
			ok, err := getJSON(tx.Bucket(bWorkflows), k, &w)
			if ok {
				out = append(out, w)
			}
			return err
		})
	})
	return out, err
}

// Source implements Storage.
func (b *Bolt) Source(ctx context.Context, hash string) ([]byte, error) {
	var src []byte
	err := b.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bSources).Get([]byte(hash))
		if v == nil {
			return ErrNotFound
		}
		src = append([]byte(nil), v...)
		return nil
	})
	return src, err
}
