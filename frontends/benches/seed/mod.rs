//! The benchmarks' reads of the workspace's `testdata/seed-data/` (each bench uses part of this module).

#![allow(dead_code)] // each bench target compiles this module and uses only some of it

/// The text of `testdata/seed-data/<name>`; panics loudly, with the path, when it cannot be read.
pub(crate) fn read_seed(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/seed-data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e} (see testdata/README.md)",
            path.display()
        )
    })
}

/// `kalman2d_T80` from `oracle_refs.json`: its source and its `rows`×`cols` observations.
pub(crate) struct Kalman {
    pub(crate) src: String,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) obs: Vec<f64>,
}

/// Reads `kalman2d_T80` from the oracle file.
pub(crate) fn kalman() -> Kalman {
    let text = read_seed("oracle_refs.json");
    // The file holds one bare `Infinity` token, which strict JSON rejects.
    let json: serde_json::Value =
        serde_json::from_str(&text.replace("Infinity", "null")).expect("oracle json");
    let prog = json["programs"]
        .as_array()
        .expect("programs")
        .iter()
        .find(|p| p["name"] == "kalman2d_T80")
        .expect("kalman2d_T80 in oracle_refs.json");
    let m = &prog["matrix"];
    Kalman {
        src: prog["src"].as_str().expect("src").to_string(),
        rows: m["rows"].as_u64().expect("rows") as usize,
        cols: m["cols"].as_u64().expect("cols") as usize,
        obs: m["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(|x| x.as_f64().expect("number"))
            .collect(),
    }
}
