//! The swap workload in PostgreSQL: schema, preload, a check of the stored function, and the measured levels of client connections.

use super::*;

/// Deals `items` round-robin into `parts` disjoint sets whose sizes differ by at most one.
pub(crate) fn partition<T>(items: Vec<T>, parts: usize) -> Vec<Vec<T>> {
    assert!(parts > 0, "partition into no parts");
    let mut out: Vec<Vec<T>> = (0..parts)
        .map(|_| Vec::with_capacity(items.len() / parts + 1))
        .collect();
    for (i, item) in items.into_iter().enumerate() {
        out[i % parts].push(item);
    }
    out
}

pub(crate) struct PostgresReport {
    pub(crate) version: String,
    pub(crate) levels: Vec<Level>,
}

pub(crate) struct Level {
    pub(crate) clients: usize,
    pub(crate) tps: f64,
    pub(crate) swaps: u64,
    pub(crate) latency_ms_p50: f64,
    pub(crate) latency_ms_p99: f64,
}

pub(crate) async fn connect(config: &tokio_postgres::Config) -> BenchResult<Client> {
    let (client, connection) = config
        .connect(NoTls)
        .await
        .step("cannot connect to the benchmark server")?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Schema and preload, a check of `swap`'s refusals, then one measurement per client count.
pub(crate) async fn postgres_phase(
    config: &tokio_postgres::Config,
    preload: usize,
    levels: &[usize],
    seconds: f64,
    warmup: f64,
) -> BenchResult<PostgresReport> {
    let mut admin = connect(config).await?;
    let version: String = admin.query_one("SHOW server_version", &[]).await?.get(0);
    // Fresh entropy for every generator: fixed seeds could make two of them produce the same ids.
    let mut rng = StdRng::from_entropy();
    eprintln!("postgres {version}: preloading {preload} ids");
    let mut ids = load(&mut admin, preload, &mut rng).await?;
    check_swap(&admin, &mut ids, &mut rng).await?;

    let mut report = PostgresReport {
        version,
        levels: Vec::new(),
    };
    let max_clients = levels.iter().copied().max().unwrap_or(1);
    if warmup > 0.0 {
        eprintln!("postgres: warming up for {warmup} s with {max_clients} clients");
        let owned = partition(std::mem::take(&mut ids), max_clients);
        let warmup = Duration::from_secs_f64(warmup);
        let (_, owned) = run_level(config, owned, warmup, Duration::ZERO).await?;
        ids = owned.into_iter().flatten().collect();
    }
    let measured = Duration::from_secs_f64(seconds);
    for &clients in levels {
        let owned = partition(std::mem::take(&mut ids), clients);
        let (level, owned) = run_level(config, owned, level_warmup(seconds), measured).await?;
        eprintln!(
            "postgres: {clients} clients: {:.0} tx/s, p50 {:.1} ms, p99 {:.1} ms",
            level.tps, level.latency_ms_p50, level.latency_ms_p99
        );
        report.levels.push(level);
        ids = owned.into_iter().flatten().collect();
    }
    // Every swap spends two ids and creates two: the table must hold exactly what the clients own.
    let count: i64 = admin.query_one("SELECT count(*) FROM uhs", &[]).await?.get(0);
    ensure_that!(
        count as usize == ids.len() && ids.len() == preload,
        "the UHS holds {count} ids, the clients own {}, {preload} were preloaded",
        ids.len()
    );
    Ok(report)
}

/// Creates the schema and loads `count` random ids with a binary COPY, then indexes, vacuums and
/// checkpoints so that the measurements start from a clean state.
pub(crate) async fn load(client: &mut Client, count: usize, rng: &mut StdRng) -> BenchResult<Vec<Id>> {
    let ids: Vec<Id> = (0..count).map(|_| rng.gen()).collect();
    let transaction = client.transaction().await?;
    transaction
        .batch_execute(SCHEMA)
        .await
        .step("cannot create the schema")?;
    let sink = transaction.copy_in("COPY uhs (id) FROM STDIN (FORMAT binary)").await?;
    let mut writer = std::pin::pin!(BinaryCopyInWriter::new(sink, &[Type::BYTEA]));
    for id in &ids {
        writer.as_mut().write(&[&id.as_slice()]).await.step("COPY failed")?;
    }
    writer.as_mut().finish().await.step("COPY failed")?;
    transaction.commit().await?;
    client.batch_execute("ALTER TABLE uhs ADD PRIMARY KEY (id)").await?;
    client.batch_execute("VACUUM (ANALYZE) uhs").await?;
    client.batch_execute("CHECKPOINT").await?;
    Ok(ids)
}

pub(crate) async fn call_swap(client: &Client, spent: &[Id], created: &[Id]) -> Result<bool, tokio_postgres::Error> {
    let spent: Vec<&[u8]> = spent.iter().map(|id| id.as_slice()).collect();
    let created: Vec<&[u8]> = created.iter().map(|id| id.as_slice()).collect();
    let row = client.query_one("SELECT swap($1, $2)", &[&spent, &created]).await?;
    Ok(row.get(0))
}

/// Checks that `swap` refuses a missing id, a repeated id and an existing output without changing
/// anything, and that a valid swap moves ids; keeps `ids` in step with the table.
pub(crate) async fn check_swap(client: &Client, ids: &mut Vec<Id>, rng: &mut StdRng) -> BenchResult<()> {
    async fn present(client: &Client, ids: &[Id]) -> BenchResult<i64> {
        let ids: Vec<&[u8]> = ids.iter().map(|id| id.as_slice()).collect();
        Ok(client
            .query_one("SELECT count(*) FROM uhs WHERE id = ANY ($1)", &[&ids])
            .await?
            .get(0))
    }
    let (a, b, other) = (ids[0], ids[1], ids[2]);
    let (missing, c, d): (Id, Id, Id) = (rng.gen(), rng.gen(), rng.gen());
    let refusals: [(&str, [Id; 2], [Id; 2], SqlState); 3] = [
        ("an id not in the UHS", [a, missing], [c, d], SqlState::NO_DATA_FOUND),
        ("the same id twice", [a, a], [c, d], SqlState::NO_DATA_FOUND),
        (
            "an output already in the UHS",
            [a, b],
            [c, other],
            SqlState::UNIQUE_VIOLATION,
        ),
    ];
    for (what, spent, created, code) in refusals {
        match call_swap(client, &spent, &created).await {
            Ok(_) => fail!("swap() accepted spending {what}"),
            Err(error) if error.code() == Some(&code) => {}
            Err(error) => {
                return Err(BenchError::Step {
                    what: format!("swap() spending {what}"),
                    source: Box::new(error),
                })
            }
        }
        ensure_that!(
            present(client, &[a, b, other]).await? == 3 && present(client, &[c, d]).await? == 0,
            "a refused swap() ({what}) changed the UHS"
        );
    }
    ensure_that!(call_swap(client, &[a, b], &[c, d]).await?, "swap() returned false");
    ensure_that!(
        present(client, &[a, b]).await? == 0 && present(client, &[c, d]).await? == 2,
        "swap() did not move the ids"
    );
    ids.retain(|id| *id != a && *id != b);
    ids.extend([c, d]);
    Ok(())
}

pub(crate) struct ClientOutcome {
    pub(crate) ids: Vec<Id>,
    pub(crate) swaps: u64,
    pub(crate) latency: Histogram<u64>,
}

/// The uncounted start of each level: connections settle, and the previous level's tail drains.
pub(crate) fn level_warmup(seconds: f64) -> Duration {
    Duration::from_secs_f64((seconds / 5.0).min(1.0))
}

/// `owned.len()` clients, connected before the clock starts, swapping closed-loop: `warmup`, then
/// `measured` in which completed swaps are counted.
pub(crate) async fn run_level(
    config: &tokio_postgres::Config,
    owned: Vec<Vec<Id>>,
    warmup: Duration,
    measured: Duration,
) -> BenchResult<(Level, Vec<Vec<Id>>)> {
    let clients = owned.len();
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        let client = connect(config).await?;
        let statement = client
            .prepare_typed("SELECT swap($1, $2)", &[Type::BYTEA_ARRAY, Type::BYTEA_ARRAY])
            .await?;
        connections.push((client, statement));
    }
    let from = Instant::now() + warmup;
    let until = from + measured;
    let tasks: Vec<_> = connections
        .into_iter()
        .zip(owned)
        .map(|((client, statement), ids)| tokio::spawn(swap_loop(client, statement, ids, from, until)))
        .collect();
    let mut swaps = 0;
    let mut latency = Histogram::<u64>::new(3)?;
    let mut owned = Vec::with_capacity(clients);
    for task in tasks {
        let outcome = task.await.step("a client task failed")??;
        swaps += outcome.swaps;
        latency.add(&outcome.latency)?;
        owned.push(outcome.ids);
    }
    let level = Level {
        clients,
        tps: if measured.is_zero() {
            0.0
        } else {
            swaps as f64 / measured.as_secs_f64()
        },
        swaps,
        latency_ms_p50: latency.value_at_quantile(0.5) as f64 / 1000.0,
        latency_ms_p99: latency.value_at_quantile(0.99) as f64 / 1000.0,
    };
    Ok((level, owned))
}

/// One client: spends two random ids it owns and creates two, one transaction at a time, until
/// `until`; counts the swaps completed in `[from, until)`.
pub(crate) async fn swap_loop(
    client: Client,
    statement: Statement,
    mut ids: Vec<Id>,
    from: Instant,
    until: Instant,
) -> BenchResult<ClientOutcome> {
    let mut rng = StdRng::from_entropy();
    let mut latency = Histogram::<u64>::new(3)?;
    let mut swaps = 0;
    loop {
        let sent = Instant::now();
        if sent >= until {
            break;
        }
        let a = ids.swap_remove(rng.gen_range(0..ids.len()));
        let b = ids.swap_remove(rng.gen_range(0..ids.len()));
        let created: [Id; 2] = [rng.gen(), rng.gen()];
        let spent_param: Vec<&[u8]> = vec![&a, &b];
        let created_param: Vec<&[u8]> = vec![&created[0], &created[1]];
        let row = client
            .query_one(&statement, &[&spent_param, &created_param])
            .await
            .step("swap() failed")?;
        ensure_that!(row.get::<_, bool>(0), "swap() returned false");
        let done = Instant::now();
        if done >= from && done < until {
            swaps += 1;
            let _ = latency.record(done.duration_since(sent).as_micros() as u64);
        }
        ids.extend(created);
    }
    Ok(ClientOutcome { ids, swaps, latency })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_deals_every_id_to_exactly_one_client() {
        let ids: Vec<u32> = (0..10).collect();
        let parts = partition(ids.clone(), 3);
        assert_eq!(parts.iter().map(Vec::len).collect::<Vec<_>>(), [4, 3, 3]);
        let mut all: Vec<u32> = parts.into_iter().flatten().collect();
        all.sort_unstable();
        assert_eq!(all, ids);
        assert_eq!(partition(vec![1, 2], 4), [vec![1], vec![2], vec![], vec![]]);
        assert_eq!(partition(Vec::<u8>::new(), 1), [Vec::<u8>::new()]);
    }
}
