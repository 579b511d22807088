//! Shrinking: a failing case is reduced greedily (fewer lanes, a subform hoisted over its parent,
//! a subform replaced by a constant, an argument deleted) while the same oracle still fails.

use crate::generate::Case;
use crate::oracle::{self, Oracle, Pool};
use crate::sx::Sx;

/// Most oracle checks one shrink may spend.
pub const MAX_CHECKS: usize = 3000;

/// The smallest case reachable from `case` on which `oracle` still fails.
pub fn shrink(case: &Case, oracle: Oracle, pool: &mut Pool) -> Case {
    let mut cur = case.clone();
    let mut checks = 0;
    'outer: loop {
        for cand in candidates(&cur, oracle) {
            if checks >= MAX_CHECKS {
                break 'outer;
            }
            checks += 1;
            let out = oracle::check(&cand, pool, Some(oracle));
            if out.failures.iter().any(|f| f.oracle == oracle) {
                cur = cand;
                continue 'outer;
            }
        }
        break;
    }
    cur
}

/// Every path (child indices from the root) to a list node, on an explicit stack.
fn list_paths(root: &Sx) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut stack = vec![(root, Vec::new())];
    while let Some((sx, path)) = stack.pop() {
        if let Sx::List(items) = sx {
            for (i, item) in items.iter().enumerate() {
                let mut p = path.clone();
                p.push(i);
                stack.push((item, p));
            }
            out.push(path);
        }
    }
    out.sort_by_key(Vec::len);
    out
}

fn at<'a>(root: &'a Sx, path: &[usize]) -> Option<&'a Sx> {
    let mut cur = root;
    for &i in path {
        match cur {
            Sx::List(items) => cur = items.get(i)?,
            _ => return None,
        }
    }
    Some(cur)
}

fn replaced(root: &Sx, path: &[usize], new: Sx) -> Sx {
    let mut out = root.clone();
    let mut cur = &mut out;
    for &i in path {
        match cur {
            Sx::List(items) if i < items.len() => cur = &mut items[i],
            _ => return root.clone(),
        }
    }
    *cur = new;
    out
}

fn candidates(case: &Case, oracle: Oracle) -> Vec<Case> {
    let mut out = Vec::new();
    let b = case.n_lanes();
    let keep = |lanes: &[usize]| Case {
        program: case.program.clone(),
        params: case
            .params
            .iter()
            .map(|(n, v)| (n.clone(), lanes.iter().map(|&l| v[l]).collect()))
            .collect(),
    };
    let min_lanes = if oracle == Oracle::Lanes { 2 } else { 1 };
    if b > min_lanes {
        if min_lanes == 1 {
            out.extend((0..b).map(|l| keep(&[l])));
        } else {
            for l1 in 0..b {
                for l2 in l1 + 1..b {
                    out.push(keep(&[l1, l2]));
                }
            }
        }
    }
    let with = |program: Sx| Case {
        program,
        params: case.params.clone(),
    };
    for path in list_paths(&case.program) {
        let Some(Sx::List(items)) = at(&case.program, &path) else {
            continue;
        };
        for child in items.iter().skip(1) {
            out.push(with(replaced(&case.program, &path, child.clone())));
        }
        for c in [0.5, 1.0] {
            out.push(with(replaced(&case.program, &path, Sx::Num(c))));
        }
        if items.len() > 2 {
            for i in 1..items.len() {
                let mut fewer = items.clone();
                fewer.remove(i);
                out.push(with(replaced(&case.program, &path, Sx::List(fewer))));
            }
        }
    }
    out
}
