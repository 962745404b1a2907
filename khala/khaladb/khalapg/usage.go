package khalapg

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nerve-agents/nerve/internal/usage"
)

// usageShards spread a rollup key's row over this many rows, by thread.
const usageShards = 8

// usageCTE adds a change's usage rows to the rollup (the change
// statement's part partUsage); args are its next arguments' placeholders.
// thread is the changed thread's placeholder, whose shard every row is
// in; "" takes each row's shard from one more array (usageArrays'
// shards: several threads' changes).
func usageCTE(thread string, args func(casts ...string) string) string {
	casts := []string{"::text[]", "::text[]", "::text[]", "::text[]", "::text[]", "::text[]", "::bigint[]", "::bigint[]",
		"::bigint[]", "::bigint[]", "::float8[]", "::bigint[]", "::bigint[]"}
	shard, cols := "u.shard", ""
	if thread != "" {
		shard = "(" + thread + " % " + strconv.Itoa(usageShards) + ")::smallint"
	} else {
		casts, cols = append(casts, "::smallint[]"), ", shard"
	}
	return `us AS (INSERT INTO khala_usage AS k (day, workflow, role, agent, adapter, model, shard, messages,
		input_tokens, output_tokens, cache_read_tokens, cost_usd, unpriced, duration_ms)
	SELECT u.day::date, u.workflow, u.role, u.agent, u.adapter, u.model, ` + shard + `,
		u.messages, u.input, u.output, u.cache_read, u.cost, u.unpriced, u.duration
	FROM unnest(` + args(casts...) + `)
		AS u(day, workflow, role, agent, adapter, model, messages, input, output, cache_read, cost, unpriced, duration` + cols + `)
	ON CONFLICT (day, workflow, role, agent, adapter, model, shard) DO UPDATE SET
		messages = k.messages + EXCLUDED.messages, input_tokens = k.input_tokens + EXCLUDED.input_tokens,
		output_tokens = k.output_tokens + EXCLUDED.output_tokens,
		cache_read_tokens = k.cache_read_tokens + EXCLUDED.cache_read_tokens, cost_usd = k.cost_usd + EXCLUDED.cost_usd,
		unpriced = k.unpriced + EXCLUDED.unpriced, duration_ms = k.duration_ms + EXCLUDED.duration_ms)`
}

// shardedRow is a usage row and the rollup shard it goes to.
type shardedRow struct {
	usage.Row
	shard int16
}

// usageArrays are the rows' columns, one row per key and shard (an upsert
// may not touch a row twice), in key order: the order their rows are
// locked in. With shards, the last column is each row's shard.
func usageArrays(rows []shardedRow, shards bool) []any {
	merged := make([]shardedRow, 0, len(rows))
	type at struct {
		key   usage.Key
		shard int16
	}
	idx := map[at]int{}
	for _, r := range rows {
		if i, ok := idx[at{r.Key, r.shard}]; ok {
			merged[i].Merge(r.Totals)
			continue
		}
		idx[at{r.Key, r.shard}] = len(merged)
		merged = append(merged, r)
	}
	slices.SortFunc(merged, func(a, b shardedRow) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Workflow, b.Workflow), cmp.Compare(a.Role, b.Role),
			cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Adapter, b.Adapter), cmp.Compare(a.Model, b.Model), cmp.Compare(a.shard, b.shard))
	})
	k := len(merged)
	day, wf, role, agent, adapter, model := make([]string, k), make([]string, k), make([]string, k), make([]string, k),
		make([]string, k), make([]string, k)
	msgs, in, out, cache, unpriced, dur, cost := make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k),
		make([]int64, k), make([]int64, k), make([]float64, k)
	shard := make([]int16, k)
	for i, r := range merged {
		day[i], wf[i], role[i], agent[i], adapter[i], model[i] = r.Day, r.Workflow, r.Role, r.Agent, r.Adapter, r.Model
		msgs[i], in[i], out[i], cache[i] = r.Messages, r.InputTokens, r.OutputTokens, r.CacheReadTokens
		unpriced[i], dur[i], shard[i] = r.Unpriced, r.DurationMS, r.shard
		if r.CostUSD != nil {
			cost[i] = *r.CostUSD
		}
	}
	cols := []any{day, wf, role, agent, adapter, model, msgs, in, out, cache, cost, unpriced, dur}
	if shards {
		cols = append(cols, shard)
	}
	return cols
}

// shardedRows are a change's usage rows, in thread n's shard.
func shardedRows(n uint64, rows []usage.Row) []shardedRow {
	out := make([]shardedRow, len(rows))
	for i, r := range rows {
		out[i] = shardedRow{r, int16(n % usageShards)}
	}
	return out
}

// Usage implements Storage: the rollup's shards summed per key.
func (p *Store) Usage(ctx context.Context, f usage.Filter) ([]usage.Row, error) {
	since := time.Time{}
	if f.Since != "" {
		var err error
		if since, err = usage.ParseSince(f.Since); err != nil {
			return nil, err
		}
	}
	rows, err := p.pool.Query(ctx, `SELECT to_char(day, 'YYYY-MM-DD'), workflow, role, agent, adapter, model,
			sum(messages)::bigint, sum(input_tokens)::bigint, sum(output_tokens)::bigint, sum(cache_read_tokens)::bigint,
			sum(cost_usd), sum(unpriced)::bigint, sum(duration_ms)::bigint
		FROM khala_usage WHERE day >= $1::date AND ($2 = '' OR workflow = $2)
		GROUP BY day, workflow, role, agent, adapter, model`, since.Format(time.DateOnly), f.Workflow)
	if err != nil {
		return nil, p.fail("read usage", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (usage.Row, error) {
		var (
			r    usage.Row
			cost float64
		)
		err := row.Scan(&r.Day, &r.Workflow, &r.Role, &r.Agent, &r.Adapter, &r.Model, &r.Messages, &r.InputTokens,
			&r.OutputTokens, &r.CacheReadTokens, &cost, &r.Unpriced, &r.DurationMS)
		if r.Messages > r.Unpriced {
			r.CostUSD = &cost
		}
		return r, err
	})
	return out, p.fail("read usage", err)
}
