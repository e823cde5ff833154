//! Line diffs between two revisions (or a revision and the draft): Myers' O(ND) algorithm on the
//! lines between the common prefix and suffix, bounded so that two unrelated 50,000-line
//! documents cost a bounded time (past the bound the middle is shown as replaced whole).

use serde::Serialize;

/// Edit distance past which the middle is reported as replaced whole.
const MAX_EDITS: usize = 2000;

/// One line of the edit script, by index into the old (`a`) and new (`b`) lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Unchanged: old index, new index.
    Same(usize, usize),
    /// Only in the old text.
    Removed(usize),
    /// Only in the new text.
    Added(usize),
}

/// The edit script turning `a` into `b`.
pub fn diff_lines(a: &[&str], b: &[&str]) -> Vec<Op> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..].iter().rev().zip(b[prefix..].iter().rev()).take_while(|(x, y)| x == y).count();
    let (am, bm) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops: Vec<Op> = (0..prefix).map(|i| Op::Same(i, i)).collect();
    match myers(am, bm) {
        Some(middle) => ops.extend(middle.into_iter().map(|op| match op {
            Op::Same(x, y) => Op::Same(x + prefix, y + prefix),
            Op::Removed(x) => Op::Removed(x + prefix),
            Op::Added(y) => Op::Added(y + prefix),
        })),
        None => {
            ops.extend((0..am.len()).map(|x| Op::Removed(x + prefix)));
            ops.extend((0..bm.len()).map(|y| Op::Added(y + prefix)));
        }
    }
    ops.extend((0..suffix).map(|i| Op::Same(a.len() - suffix + i, b.len() - suffix + i)));
    ops
}

fn myers(a: &[&str], b: &[&str]) -> Option<Vec<Op>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (a.len() + b.len()).min(MAX_EDITS);
    let off = max as isize + 1;
    let mut v = vec![0isize; 2 * max + 3];
    // trace[d] holds v[-d..=d] as it was when step d started (i32: half the memory at the bound).
    let mut trace: Vec<Vec<i32>> = Vec::new();
    for d in 0..=max as isize {
        trace.push(v[(off - d) as usize..=(off + d) as usize].iter().map(|&x| x as i32).collect());
        let mut k = -d;
        while k <= d {
            let i = (off + k) as usize;
            let mut x = if k == -d || (k != d && v[i - 1] < v[i + 1]) { v[i + 1] } else { v[i - 1] + 1 };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[i] = x;
            if x >= n && y >= m {
                return Some(backtrack(&trace, n, m));
            }
            k += 2;
        }
    }
    None
}

fn backtrack(trace: &[Vec<i32>], n: isize, m: isize) -> Vec<Op> {
    let (mut x, mut y) = (n, m);
    let mut out = Vec::new();
    for (d, v) in trace.iter().enumerate().rev() {
        let d = d as isize;
        let at = |k: isize| v[(k + d) as usize] as isize;
        let k = x - y;
        let prev_k = if k == -d || (k != d && at(k - 1) < at(k + 1)) { k + 1 } else { k - 1 };
        let prev_x = if d == 0 { 0 } else { at(prev_k) };
        let prev_y = if d == 0 { 0 } else { prev_x - prev_k };
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            out.push(Op::Same(x as usize, y as usize));
        }
        if d > 0 {
            if x == prev_x {
                out.push(Op::Added((y - 1) as usize));
            } else {
                out.push(Op::Removed((x - 1) as usize));
            }
        }
        x = prev_x;
        y = prev_y;
    }
    out.reverse();
    out
}

/// A unified diff (`diff -u`) with `context` lines around each change; empty when equal.
pub fn unified(a: &str, b: &str, a_name: &str, b_name: &str, context: usize) -> String {
    let (al, bl): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let ops = diff_lines(&al, &bl);
    let changed: Vec<usize> =
        ops.iter().enumerate().filter(|(_, o)| !matches!(o, Op::Same(..))).map(|(i, _)| i).collect();
    if changed.is_empty() {
        return String::new();
    }
    let mut out = format!("--- {a_name}\n+++ {b_name}\n");
    let mut i = 0;
    while i < changed.len() {
        let start = changed[i].saturating_sub(context);
        let mut end = changed[i];
        while i < changed.len() && changed[i] <= end + 2 * context + 1 {
            end = changed[i];
            i += 1;
        }
        let end = (end + context + 1).min(ops.len());
        let hunk = &ops[start..end];
        let a_start = hunk.iter().find_map(|o| match o {
            Op::Same(x, _) | Op::Removed(x) => Some(*x),
            Op::Added(_) => None,
        });
        let b_start = hunk.iter().find_map(|o| match o {
            Op::Same(_, y) | Op::Added(y) => Some(*y),
            Op::Removed(_) => None,
        });
        let a_len = hunk.iter().filter(|o| !matches!(o, Op::Added(_))).count();
        let b_len = hunk.iter().filter(|o| !matches!(o, Op::Removed(_))).count();
        let range = |start: Option<usize>, len: usize| match (start, len) {
            (_, 0) => format!("{},0", start.map_or(0, |s| s)),
            (Some(s), l) => format!("{},{l}", s + 1),
            (None, l) => format!("0,{l}"),
        };
        out.push_str(&format!("@@ -{} +{} @@\n", range(a_start, a_len), range(b_start, b_len)));
        for op in hunk {
            match *op {
                Op::Same(x, _) => out.push_str(&format!(" {}\n", al[x])),
                Op::Removed(x) => out.push_str(&format!("-{}\n", al[x])),
                Op::Added(y) => out.push_str(&format!("+{}\n", bl[y])),
            }
        }
    }
    out
}

/// One row of a side-by-side view.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = DiffRow)]
pub struct Row {
    /// What the row shows.
    pub kind: RowKind,
    /// Old line number (from 1) and text.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = line_schema)]
    pub left: Option<(usize, String)>,
    /// New line number (from 1) and text.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = line_schema)]
    pub right: Option<(usize, String)>,
    /// Lines left out by a `skip` row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<usize>,
}

/// What a side-by-side row shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RowKind {
    /// A line both sides have.
    Same,
    /// A line on the left replaced by the one on the right.
    Changed,
    /// A line only the left has.
    Removed,
    /// A line only the right has.
    Added,
    /// Unchanged lines left out (`skipped` says how many).
    Skip,
}

/// A line of a row: `[number, text]`.
fn line_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    ArrayBuilder::new()
        .prefix_items([
            ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).build(),
            ObjectBuilder::new().schema_type(Type::String).build(),
        ])
        .min_items(Some(2))
        .max_items(Some(2))
        .description(Some("`[line number, text]`"))
        .build()
}

/// Side-by-side rows: runs of removed and added lines paired as `changed`, unchanged runs longer
/// than `2 × context` folded into one `skip` row.
pub fn side_by_side(a: &str, b: &str, context: usize) -> Vec<Row> {
    let (al, bl): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let ops = diff_lines(&al, &bl);
    let line = |lines: &[&str], i: usize| Some((i + 1, lines[i].to_string()));
    let mut rows = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        match ops[i] {
            Op::Same(..) => {
                let run = ops[i..].iter().take_while(|o| matches!(o, Op::Same(..))).count();
                let (first, last) = (i == 0, i + run == ops.len());
                let keep_head = if first { 0 } else { context };
                let keep_tail = if last { 0 } else { context };
                for (j, op) in ops[i..i + run].iter().enumerate() {
                    let Op::Same(x, y) = *op else { continue };
                    if j < keep_head || j >= run.saturating_sub(keep_tail) || run <= keep_head + keep_tail + 1 {
                        rows.push(Row { kind: RowKind::Same, left: line(&al, x), right: line(&bl, y), skipped: None });
                    } else if j == keep_head {
                        let skipped = run - keep_head - keep_tail;
                        rows.push(Row { kind: RowKind::Skip, left: None, right: None, skipped: Some(skipped) });
                    }
                }
                i += run;
            }
            _ => {
                let run = ops[i..].iter().take_while(|o| !matches!(o, Op::Same(..))).count();
                let removed: Vec<usize> = ops[i..i + run]
                    .iter()
                    .filter_map(|o| if let Op::Removed(x) = o { Some(*x) } else { None })
                    .collect();
                let added: Vec<usize> =
                    ops[i..i + run].iter().filter_map(|o| if let Op::Added(y) = o { Some(*y) } else { None }).collect();
                for j in 0..removed.len().max(added.len()) {
                    let (l, r) = (removed.get(j), added.get(j));
                    let kind = match (l, r) {
                        (Some(_), Some(_)) => RowKind::Changed,
                        (Some(_), None) => RowKind::Removed,
                        _ => RowKind::Added,
                    };
                    rows.push(Row {
                        kind,
                        left: l.and_then(|&x| line(&al, x)),
                        right: r.and_then(|&y| line(&bl, y)),
                        skipped: None,
                    });
                }
                i += run;
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(a: &[&str], b: &[&str], ops: &[Op]) -> (Vec<String>, Vec<String>) {
        let old = ops.iter().filter_map(|o| match o {
            Op::Same(x, _) | Op::Removed(x) => Some(a[*x].to_string()),
            Op::Added(_) => None,
        });
        let new = ops.iter().filter_map(|o| match o {
            Op::Same(_, y) | Op::Added(y) => Some(b[*y].to_string()),
            Op::Removed(_) => None,
        });
        (old.collect(), new.collect())
    }

    #[test]
    fn edit_scripts_rebuild_both_sides_and_are_minimal() {
        let cases: &[(&str, &str, usize)] = &[
            ("a b c a b b a", "c b a b a c", 5),
            ("", "x y", 2),
            ("x y", "", 2),
            ("same", "same", 0),
            ("a b c d e f", "a x c d y f", 4),
        ];
        for (a, b, edits) in cases {
            let a: Vec<&str> = a.split_whitespace().collect();
            let b: Vec<&str> = b.split_whitespace().collect();
            let ops = diff_lines(&a, &b);
            let (old, new) = apply(&a, &b, &ops);
            assert_eq!(old, a);
            assert_eq!(new, b);
            assert_eq!(ops.iter().filter(|o| !matches!(o, Op::Same(..))).count(), *edits, "{a:?} → {b:?}");
        }
    }

    #[test]
    fn unified_output_reads_like_diff_u() {
        let a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let b = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        let u = unified(a, b, "r1", "r2", 2);
        assert_eq!(u, "--- r1\n+++ r2\n@@ -3,5 +3,5 @@\n 3\n 4\n-5\n+five\n 6\n 7\n");
        assert_eq!(unified(a, a, "r1", "r2", 3), "");
    }

    #[test]
    fn side_by_side_pairs_changes_and_folds_long_runs() {
        let a: String = (1..=20).map(|i| format!("{i}\n")).collect();
        let b = a.replace("10\n", "ten\n");
        let rows = side_by_side(&a, &b, 2);
        let kinds: Vec<RowKind> = rows.iter().map(|r| r.kind).collect();
        use RowKind::*;
        assert_eq!(kinds, [Skip, Same, Same, Changed, Same, Same, Skip]);
        assert_eq!(rows[3].left, Some((10, "10".into())));
        assert_eq!(rows[3].right, Some((10, "ten".into())));
        assert_eq!(rows[0].skipped, Some(7));
    }

    #[test]
    fn unrelated_large_documents_finish() {
        let a: Vec<String> = (0..30_000).map(|i| format!("a{i}")).collect();
        let b: Vec<String> = (0..30_000).map(|i| format!("b{i}")).collect();
        let (a, b): (Vec<&str>, Vec<&str>) =
            (a.iter().map(|s| s.as_str()).collect(), b.iter().map(|s| s.as_str()).collect());
        assert_eq!(diff_lines(&a, &b).len(), 60_000);
    }
}
