package khalabolt

import (
	"context"
	"fmt"
	"time"

	"github.com/nerve-agents/nerve/khala/khaladb"

	bolt "go.etcd.io/bbolt"
)

// AddEnrollToken implements Storage.
func (b *Store) AddEnrollToken(ctx context.Context, t khaladb.EnrollToken) error {
	return b.update(func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bEnroll), t.Hash[:], t)
	})
}

// Enroll implements Storage.
func (b *Store) Enroll(ctx context.Context, enroll khaladb.Hash, a khaladb.Agent) error {
	var result error
	err := b.update(func(tx *bolt.Tx) error {
		result = nil
		eb := tx.Bucket(bEnroll)
		var et khaladb.EnrollToken
		ok, err := getJSON(eb, enroll[:], &et)
		switch {
		case err != nil:
			return err
		case !ok || !khaladb.SameHash(et.Hash, enroll):
			result = khaladb.ErrUnauthorized
			return nil
		case !et.ExpiresAt.IsZero() && !a.EnrolledAt.Before(et.ExpiresAt):
			result = fmt.Errorf("%w: enrollment token expired at %s", khaladb.ErrUnauthorized, et.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		case et.Uses <= 0:
			result = fmt.Errorf("%w: enrollment token has been used up", khaladb.ErrUnauthorized)
			return nil
		}
		agents := tx.Bucket(bAgents)
		if agents.Get([]byte(a.Name)) != nil {
			result = khaladb.ErrNameTaken
			return nil
		}
		et.Uses--
		a.Scopes = et.Scopes
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
// Known agents are cached (see shared.Agents): every request authenticates.
func (b *Store) AgentByToken(ctx context.Context, h khaladb.Hash) (khaladb.Agent, error) {
	if a, ok := b.agents.Get(h); ok {
		return a, nil
	}
	var a khaladb.Agent
	err := b.view(ctx, func(tx *bolt.Tx) error {
		name := tx.Bucket(bTokens).Get(h[:])
		if name == nil {
			return khaladb.ErrUnauthorized
		}
		ok, err := getJSON(tx.Bucket(bAgents), name, &a)
		if err != nil {
			return err
		}
		if !ok || !khaladb.SameHash(a.Token, h) {
			return khaladb.ErrUnauthorized
		}
		return nil
	})
	if err == nil {
		b.agents.Put(h, a)
	}
	return a, err
}

// RevokeAgent implements Storage. One process serves a bbolt file, so
// dropping its cache entry here is enough.
func (b *Store) RevokeAgent(ctx context.Context, name string) error {
	var a khaladb.Agent
	found := false
	err := b.update(func(tx *bolt.Tx) error {
		agents := tx.Bucket(bAgents)
		ok, err := getJSON(agents, []byte(name), &a)
		if found = ok; err != nil || !ok {
			return err
		}
		if err := tx.Bucket(bTokens).Delete(a.Token[:]); err != nil {
			return err
		}
		if err := tx.Bucket(bSeen).Delete([]byte(name)); err != nil {
			return err
		}
		return agents.Delete([]byte(name))
	})
	if err != nil {
		return err
	}
	if !found {
		return khaladb.ErrNotFound
	}
	b.agents.Clear()
	return nil
}

// PutWorkflow implements Storage.
func (b *Store) PutWorkflow(ctx context.Context, w khaladb.WorkflowRecord, source []byte) (bool, error) {
	var created bool
	err := b.update(func(tx *bolt.Tx) error {
		wb := tx.Bucket(bWorkflows)
		var old khaladb.WorkflowRecord
		ok, err := getJSON(wb, []byte(w.Name), &old)
		if err != nil {
			return err
		}
		created = !ok
		switch {
		case created && w.Owner == "":
			w.Owner = w.UpdatedBy
		case !created && w.Owner != "" && w.Owner != old.OwnedBy():
			return fmt.Errorf("%w: workflow %s is %s's", khaladb.ErrNotOwner, w.Name, old.OwnedBy())
		case !created:
			w.Owner = old.OwnedBy()
		}
		if err := tx.Bucket(bSources).Put([]byte(w.SourceHash), source); err != nil {
			return err
		}
		return putJSON(wb, []byte(w.Name), w)
	})
	return created, err
}

// Workflow implements Storage.
func (b *Store) Workflow(ctx context.Context, name string) (khaladb.WorkflowRecord, error) {
	var w khaladb.WorkflowRecord
	err := b.view(ctx, func(tx *bolt.Tx) error {
		ok, err := getJSON(tx.Bucket(bWorkflows), []byte(name), &w)
		if err == nil && !ok {
			err = khaladb.ErrNotFound
		}
		return err
	})
	return w, err
}

// Workflows implements Storage.
func (b *Store) Workflows(ctx context.Context) ([]khaladb.WorkflowRecord, error) {
	var out []khaladb.WorkflowRecord
	err := b.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bWorkflows).ForEach(func(k, v []byte) error {
			var w khaladb.WorkflowRecord
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
func (b *Store) Source(ctx context.Context, hash string) ([]byte, error) {
	var src []byte
	err := b.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bSources).Get([]byte(hash))
		if v == nil {
			return khaladb.ErrNotFound
		}
		src = append([]byte(nil), v...)
		return nil
	})
	return src, err
}
