import { AsyncLocalStorage } from 'node:async_hooks';
import pg, { type PoolClient, type PoolConfig, type QueryResult, type QueryResultRow } from 'pg';
import { MasterRunnerError } from '../errors.js';

/*
 * The pool and the three ways the store talks to it:
 *   read(fn)         one statement, autocommit;
 *   transaction(fn)  BEGIN … COMMIT on one connection (ROLLBACK when fn throws);
 *   unit(lock, work) a transaction whose `work` runs with the connection as
 *                    its *unit*: every store call made from inside it (a
 *                    dispatch reads the request id under the target lock)
 *                    runs on that same connection, a transaction nested in it
 *                    as a SAVEPOINT.
 *
 * Why the unit routes nested calls to its own connection: a unit that took
 * a second pooled connection while holding the first would deadlock the
 * pool once every connection is held by a unit waiting for another (ten
 * concurrent admissions on a pool of ten). It also lets a call made under
 * the lock see what the unit wrote. Calls on one unit are run one at a time
 * (a queue), so two nested transactions never interleave their savepoints.
 * The queue only serializes calls that enter from the unit's caller; the
 * store's own statements inside a call use the connection directly.
 */

export type Query = <R extends QueryResultRow = QueryResultRow>(sql: string, params?: readonly unknown[]) => Promise<QueryResult<R>>;

interface Unit {
  readonly client: PoolClient;
  open: boolean;
  tail: Promise<unknown>;
}

/** Statement names by text, the same in every pool and connection (node-postgres refuses one name for two texts). */
const statementNames = new Map<string, string>();
/** Past this many distinct texts (a list() with an unusual filter or limit), statements go unnamed: never an unbounded set per connection. */
const MAX_NAMED_STATEMENTS = 96;

function statementName(sql: string): string | undefined {
  const known = statementNames.get(sql);
  if (known !== undefined || statementNames.size >= MAX_NAMED_STATEMENTS) return known;
  const name = `oduflow_s${statementNames.size + 1}`;
  statementNames.set(sql, name);
  return name;
}

/**
 * A statement with parameters is a named prepared statement: each
 * connection parses and plans it once, later calls only bind and execute
 * (one round trip either way). Without parameters (BEGIN, COMMIT,
 * savepoints) it goes as a simple query.
 */
function queryOn(client: pg.ClientBase | pg.Pool): Query {
  return (sql, params) => {
    if (params === undefined || params.length === 0) return client.query(sql);
    const name = statementName(sql);
    return name === undefined ? client.query(sql, [...params]) : client.query({ name, text: sql, values: [...params] });
  };
}

export class Database {
  readonly #pool: pg.Pool;
  readonly #units = new AsyncLocalStorage<Unit>();
  #savepoints = 0;

  constructor(config: PoolConfig) {
    this.#pool = new pg.Pool(config);
    // An idle connection that breaks (a server restart) is dropped by the pool; the next
    // statement fails and is reported there. Without a listener the process would crash.
    this.#pool.on('error', () => undefined);
  }

  /** Whether this call runs inside a unit (its statements join the unit's transaction). */
  get inUnit(): boolean {
    return this.#current() !== undefined;
  }

  /** One statement outside any transaction, or inside the enclosing unit. */
  async read<T>(fn: (q: Query) => Promise<T>): Promise<T> {
    const unit = this.#current();
    if (unit !== undefined) return this.#queued(unit, () => fn(queryOn(unit.client)));
    return fn(queryOn(this.#pool));
  }

  /** `fn` in one transaction (a savepoint inside the enclosing unit); rolled back when it throws. */
  async transaction<T>(fn: (q: Query) => Promise<T>): Promise<T> {
    const unit = this.#current();
    if (unit !== undefined) return this.#queued(unit, () => this.#savepoint(unit.client, () => fn(queryOn(unit.client))));
    return this.#withClient((client, doom) => this.#begin(client, doom, () => fn(queryOn(client))));
  }

  /**
   * A transaction that first runs `lock`, then `work` as a unit (see above);
   * `scope` runs calls on the unit (the TargetUnit's blockers and create).
   */
  async unit<T>(lock: (q: Query) => Promise<void>, work: (scope: UnitScope) => Promise<T>): Promise<T> {
    const run = async (client: PoolClient): Promise<T> => {
      await lock(queryOn(client));
      const unit: Unit = { client, open: true, tail: Promise.resolve() };
      try {
        return await this.#units.run(unit, () => work(this.#scope(unit)));
      } finally {
        unit.open = false;
        // A call the work started and did not await must end before COMMIT or ROLLBACK.
        await unit.tail.catch(() => undefined);
      }
    };
    const outer = this.#current();
    if (outer !== undefined) return this.#queued(outer, () => this.#savepoint(outer.client, () => run(outer.client)));
    return this.#withClient((client, doom) => this.#begin(client, doom, () => run(client)));
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }

  #scope(unit: Unit): UnitScope {
    // Called from inside a unit nested in this one, the call joins the nested unit's queue
    // (same connection, same transaction): this one's queue waits for the nested unit to end.
    const on = (): Unit => {
      const inner = this.#current();
      return inner !== undefined && inner.client === unit.client ? inner : unit;
    };
    return {
      read: (fn) => {
        const target = on();
        return this.#queued(target, () => fn(queryOn(target.client)));
      },
      transaction: (fn) => {
        const target = on();
        return this.#queued(target, () => this.#savepoint(target.client, () => fn(queryOn(target.client))));
      },
    };
  }

  #current(): Unit | undefined {
    const unit = this.#units.getStore();
    return unit?.open === true ? unit : undefined;
  }

  /** Runs `fn` after every call queued on the unit before it. */
  #queued<T>(unit: Unit, fn: () => Promise<T>): Promise<T> {
    if (!unit.open) {
      return Promise.reject(new MasterRunnerError('internal', 'a store unit was used after it ended'));
    }
    const result = unit.tail.then(fn, fn);
    unit.tail = result.catch(() => undefined);
    return result;
  }

  async #withClient<T>(fn: (client: PoolClient, doom: () => void) => Promise<T>): Promise<T> {
    const client = await this.#pool.connect();
    let broken = false;
    const doom = (): void => {
      broken = true;
    };
    // A checked-out connection has no pool listener: a socket error must not crash the process.
    client.on('error', doom);
    try {
      return await fn(client, doom);
    } finally {
      client.off('error', doom);
      // A connection that broke, or whose ROLLBACK failed, is closed rather than reused.
      client.release(broken);
    }
  }

  async #begin<T>(client: PoolClient, doom: () => void, fn: () => Promise<T>): Promise<T> {
    await client.query('BEGIN');
    let result: T;
    try {
      result = await fn();
    } catch (error) {
      await client.query('ROLLBACK').catch(doom);
      throw error;
    }
    await client.query('COMMIT');
    return result;
  }

  async #savepoint<T>(client: PoolClient, fn: () => Promise<T>): Promise<T> {
    this.#savepoints += 1;
    const name = `oduflow_${this.#savepoints}`;
    await client.query(`SAVEPOINT ${name}`);
    let result: T;
    try {
      result = await fn();
    } catch (error) {
      await client.query(`ROLLBACK TO SAVEPOINT ${name}`);
      await client.query(`RELEASE SAVEPOINT ${name}`);
      throw error;
    }
    await client.query(`RELEASE SAVEPOINT ${name}`);
    return result;
  }
}

/** A unit's own calls, for the TargetUnit it hands out (valid only while the unit runs). */
export interface UnitScope {
  read<T>(fn: (q: Query) => Promise<T>): Promise<T>;
  transaction<T>(fn: (q: Query) => Promise<T>): Promise<T>;
}
