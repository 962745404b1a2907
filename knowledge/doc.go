// Package knowledge is a repository's knowledge index: what an agent asks
// instead of being handed a whole repository.
//
// Each repository carries a committed knowledge.yaml (include and exclude
// globs) and a rebuildable index beside it, .nerve/knowledge.db, an SQLite
// file (pure Go, modernc.org/sqlite) in WAL mode so a query can run while a
// sync writes.
//
// Sync walks the repository, skips .git, binary and oversized files, and
// re-reads only files whose size or modification time changed; a file whose
// content hash is unchanged costs one stat. Changed files are cut into
// chunks that follow the structure of the text (Go declarations through
// go/parser, TypeScript and Python functions and classes, Markdown sections,
// a line window otherwise). Chunks are compared by content hash, so an edit
// rewrites only the chunks it touched. Every change to one file is one part
// of a transaction: a sync killed at any point leaves the last committed
// state, which the next sync completes.
//
// Ranking works with no service at all: BM25 (SQLite FTS5) over code-aware
// tokens, where an identifier is indexed whole and split at camelCase and
// snake_case boundaries, so "signal bus" finds SignalBus. When an
// OpenAI-compatible /v1/embeddings endpoint is configured, sync also stores
// one vector per distinct chunk text and model (the cache key is the content
// hash, so no text is embedded twice), and a query fuses the BM25 ranking
// with cosine similarity by reciprocal rank fusion. Vectors of different
// models are kept apart by the model name and never compared.
//
// Synced repositories are remembered in NERVE_HOME (knowledge-repos.json)
// so a query can search all of them.
package knowledge
