package khalabolt

import (
	"context"

	"github.com/nerve-agents/nerve/khala/khaladb"

	bolt "go.etcd.io/bbolt"
)

// AddPerson implements Storage.
func (b *Store) AddPerson(ctx context.Context, p khaladb.Person) error {
	taken := false
	err := b.update(func(tx *bolt.Tx) error {
		people := tx.Bucket(bPeople)
		if taken = people.Get([]byte(p.Name)) != nil; taken {
			return nil
		}
		if err := putJSON(people, []byte(p.Name), p); err != nil {
			return err
		}
		return tx.Bucket(bPersonTok).Put(p.Token[:], []byte(p.Name))
	})
	if err == nil && taken {
		return khaladb.ErrNameTaken
	}
	return err
}

// RemovePerson implements Storage.
func (b *Store) RemovePerson(ctx context.Context, name string) error {
	found := false
	err := b.update(func(tx *bolt.Tx) error {
		people := tx.Bucket(bPeople)
		var p khaladb.Person
		ok, err := getJSON(people, []byte(name), &p)
		if found = ok; err != nil || !ok {
			return err
		}
		if err := tx.Bucket(bPersonTok).Delete(p.Token[:]); err != nil {
			return err
		}
		return people.Delete([]byte(name))
	})
	if err == nil && !found {
		return khaladb.ErrNotFound
	}
	return err
}

// People implements Storage.
func (b *Store) People(ctx context.Context) ([]khaladb.Person, error) {
	var out []khaladb.Person
	err := b.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bPeople).ForEach(func(k, v []byte) error {
			var p khaladb.Person
			_, err := getJSON(tx.Bucket(bPeople), k, &p)
			out = append(out, p)
			return err
		})
	})
	return out, err
}

// PersonByToken implements Storage.
func (b *Store) PersonByToken(ctx context.Context, h khaladb.Hash) (khaladb.Person, error) {
	var p khaladb.Person
	err := b.view(ctx, func(tx *bolt.Tx) error {
		name := tx.Bucket(bPersonTok).Get(h[:])
		if name == nil {
			return khaladb.ErrUnauthorized
		}
		ok, err := getJSON(tx.Bucket(bPeople), name, &p)
		if err != nil {
			return err
		}
		if !ok || !khaladb.SameHash(p.Token, h) {
			return khaladb.ErrUnauthorized
		}
		return nil
	})
	return p, err
}

// WaitingTurns implements Storage.
func (b *Store) WaitingTurns(ctx context.Context) ([]khaladb.Turn, error) {
	var out []khaladb.Turn
	err := b.view(ctx, func(tx *bolt.Tx) error {
		threads := tx.Bucket(bThreads)
		c := tx.Bucket(bIndex).Cursor()
		for k, _ := c.Seek([]byte{ixWaiting}); k != nil && k[0] == ixWaiting; k, _ = c.Next() {
			_, n, step := ixParse(k)
			raw := threads.Get(turnKey(n, step))
			if raw == nil {
				continue
			}
			t, err := decodeTurn(raw)
			if err != nil {
				return err
			}
			if t.State == khaladb.TurnWaiting {
				out = append(out, t)
			}
		}
		return nil
	})
	return out, err
}
