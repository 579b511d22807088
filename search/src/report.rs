//! What an evaluation prints: human text (`value = …`, `d/dq = …`, one line per lane) and JSON
//! (serde structs) with round-tripping numbers (shortest representation; `"inf"`, `"-inf"`,
//! `"nan"` as strings, [`JsonNumber`]).

use indexmap::IndexMap;
use ndvm_core::{Evaluation, Output};
use serde::{Serialize, Serializer};

/// The result of one `eval` run, ready to be printed.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalReport {
    /// Number of lanes B of the run.
    pub n_lanes: usize,
    /// Whether gradients were requested (`--grad`); when false no gradient is printed.
    pub grad: bool,
    /// What the evaluator returned.
    pub evaluation: Evaluation,
}

/// The value of one lane, borrowed from an [`Output`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LaneValue<'a> {
    /// A number.
    Number(f64),
    /// A boolean.
    Bool(bool),
    /// A vector.
    Vector(&'a [f64]),
    /// A row-major matrix.
    Matrix {
        /// Rows.
        rows: usize,
        /// Columns.
        cols: usize,
        /// `rows * cols` elements.
        data: &'a [f64],
    },
    /// Any other value, printed (shared by all lanes).
    Other(&'a str),
}

/// The value of `lane_idx` in `output`. An output holding a single lane's worth of data is treated as
/// uniform (the same on every lane); a lane that is out of range reads as NaN.
pub fn lane_value(output: &Output, lane_idx: usize) -> LaneValue<'_> {
    fn chunk(data: &[f64], width: usize, lane_idx: usize) -> &[f64] {
        let idx = if data.len() == width { 0 } else { lane_idx };
        data.get(idx * width..(idx + 1) * width).unwrap_or(&[])
    }
    match output {
        Output::Number(v) => LaneValue::Number(pick(v, lane_idx).copied().unwrap_or(f64::NAN)),
        Output::Bool(v) => LaneValue::Bool(pick(v, lane_idx).copied().unwrap_or(false)),
        Output::Vector { len, data } => LaneValue::Vector(chunk(data, *len, lane_idx)),
        Output::Matrix { rows, cols, data } => LaneValue::Matrix {
            rows: *rows,
            cols: *cols,
            data: chunk(data, rows * cols, lane_idx),
        },
        Output::Other(text) => LaneValue::Other(text),
    }
}

/// Element `lane_idx` of a per-lane slice, or its only element when it holds one (uniform).
fn pick<T>(per_lane: &[T], lane_idx: usize) -> Option<&T> {
    if per_lane.len() == 1 {
        per_lane.first()
    } else {
        per_lane.get(lane_idx)
    }
}

impl EvalReport {
    /// Whether `lane_idx` is flagged as faulted (a non-finite value or gradient).
    pub fn fault(&self, lane_idx: usize) -> bool {
        pick(&self.evaluation.faults, lane_idx)
            .copied()
            .unwrap_or(false)
    }

    /// The gradient of `lane_idx` with respect to the `grad_idx`-th differentiable binding.
    pub fn grad_at(&self, grad_idx: usize, lane_idx: usize) -> f64 {
        pick(&self.evaluation.grads[grad_idx].per_lane, lane_idx)
            .copied()
            .unwrap_or(f64::NAN)
    }

    /// Human-readable text, one line per item, ending in a newline.
    ///
    /// One lane: `value = 5.5` then `d/dq = 4.0` per gradient. Several lanes: one line per lane,
    /// `lane 0: value = 5.5  d/dq = 4.0`. A faulted lane gets ` (fault)` after its value.
    pub fn to_human(&self) -> String {
        let mut out = String::new();
        let grads = if self.grad {
            self.evaluation.grads.as_slice()
        } else {
            &[]
        };
        if self.n_lanes == 1 {
            out.push_str("value = ");
            push_human_value(&mut out, lane_value(&self.evaluation.value, 0));
            if self.fault(0) {
                out.push_str(" (fault)");
            }
            out.push('\n');
            for (grad_idx, g) in grads.iter().enumerate() {
                out.push_str(&format!(
                    "d/d{} = {}\n",
                    g.name,
                    human_number(self.grad_at(grad_idx, 0))
                ));
            }
            return out;
        }
        for lane_idx in 0..self.n_lanes {
            out.push_str(&format!("lane {lane_idx}: value = "));
            push_human_value(&mut out, lane_value(&self.evaluation.value, lane_idx));
            for (grad_idx, g) in grads.iter().enumerate() {
                out.push_str(&format!(
                    "  d/d{} = {}",
                    g.name,
                    human_number(self.grad_at(grad_idx, lane_idx))
                ));
            }
            if self.fault(lane_idx) {
                out.push_str("  (fault)");
            }
            out.push('\n');
        }
        out
    }

    /// One JSON object on one line (no trailing newline).
    ///
    /// One lane: `{"value":5.5,"grads":{"q":4.0},"fault":false}`. Several lanes:
    /// `{"lanes":3,"value":[…],"grads":{"q":[…]},"faults":[…]}`. `grads` is present only when
    /// gradients were requested, keyed in binding order.
    pub fn to_json(&self) -> String {
        let names = || self.evaluation.grads.iter().map(|g| g.name.as_str());
        let lanes = 0..self.n_lanes;
        if self.n_lanes == 1 {
            return json_line(&OneLane {
                value: lane_value(&self.evaluation.value, 0).into(),
                grads: self.grad.then(|| {
                    (names().enumerate())
                        .map(|(g, name)| (name, JsonNumber(self.grad_at(g, 0))))
                        .collect()
                }),
                fault: self.fault(0),
            });
        }
        json_line(&ManyLanes {
            lanes: self.n_lanes,
            value: lanes
                .clone()
                .map(|l| lane_value(&self.evaluation.value, l).into())
                .collect(),
            grads: self.grad.then(|| {
                (names().enumerate())
                    .map(|(g, name)| {
                        let per_lane = lanes.clone().map(|l| JsonNumber(self.grad_at(g, l)));
                        (name, per_lane.collect())
                    })
                    .collect()
            }),
            faults: lanes.map(|l| self.fault(l)).collect(),
        })
    }
}

/// `eval --json` of one lane.
#[derive(Serialize)]
struct OneLane<'a> {
    value: LaneJson<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grads: Option<IndexMap<&'a str, JsonNumber>>,
    fault: bool,
}

/// `eval --json` of several lanes.
#[derive(Serialize)]
struct ManyLanes<'a> {
    lanes: usize,
    value: Vec<LaneJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grads: Option<IndexMap<&'a str, Vec<JsonNumber>>>,
    faults: Vec<bool>,
}

/// An `f64` in JSON: the shortest round-tripping number when finite, and the strings `"inf"`,
/// `"-inf"`, `"nan"` otherwise (JSON has no non-finite numbers).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JsonNumber(pub f64);

impl Serialize for JsonNumber {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.0.is_finite() {
            s.serialize_f64(self.0)
        } else {
            s.serialize_str(&human_number(self.0))
        }
    }
}

/// One lane's value in JSON: number, boolean, array, array of row arrays, or string.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LaneJson<'a> {
    /// A number.
    Number(JsonNumber),
    /// A boolean.
    Bool(bool),
    /// A vector.
    Vector(Vec<JsonNumber>),
    /// A matrix as rows.
    Matrix(Vec<Vec<JsonNumber>>),
    /// Any other value, printed.
    Other(&'a str),
}

impl<'a> From<LaneValue<'a>> for LaneJson<'a> {
    fn from(value: LaneValue<'a>) -> Self {
        let row = |xs: &[f64]| xs.iter().map(|x| JsonNumber(*x)).collect();
        match value {
            LaneValue::Number(x) => LaneJson::Number(JsonNumber(x)),
            LaneValue::Bool(b) => LaneJson::Bool(b),
            LaneValue::Vector(data) => LaneJson::Vector(row(data)),
            LaneValue::Matrix { cols, data, .. } => {
                LaneJson::Matrix(data.chunks(cols.max(1)).map(row).collect())
            }
            LaneValue::Other(text) => LaneJson::Other(text),
        }
    }
}

/// `value` as one line of JSON. Our output types always serialise; should one ever fail, the
/// line is an `{"error": …}` object rather than a panic.
pub fn json_line<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| {
        let message = serde_json::Value::String(format!("cannot write JSON: {e}"));
        format!("{{\"error\":{message}}}")
    })
}

/// A number for people: the shortest text that reads back to the same `f64` (`5.5`, `1e-7`), and
/// `inf`, `-inf`, `nan` for non-finite values.
pub fn human_number(x: f64) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else if x.is_infinite() {
        if x > 0.0 { "inf" } else { "-inf" }.to_string()
    } else {
        format!("{x:?}")
    }
}

fn push_human_value(out: &mut String, value: LaneValue<'_>) {
    let push_row = |out: &mut String, row: &[f64]| {
        out.push('[');
        for (idx, x) in row.iter().enumerate() {
            if idx > 0 {
                out.push_str(", ");
            }
            out.push_str(&human_number(*x));
        }
        out.push(']');
    };
    match value {
        LaneValue::Number(x) => out.push_str(&human_number(x)),
        LaneValue::Bool(b) => out.push_str(if b { "#t" } else { "#f" }),
        LaneValue::Vector(data) => push_row(out, data),
        LaneValue::Matrix { cols, data, .. } => {
            out.push('[');
            for (idx, row) in data.chunks(cols.max(1)).enumerate() {
                if idx > 0 {
                    out.push_str(", ");
                }
                push_row(out, row);
            }
            out.push(']');
        }
        LaneValue::Other(text) => out.push_str(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndvm_core::Gradient;

    fn report(n_lanes: usize, value: Output, grads: Vec<(&str, Vec<f64>)>) -> EvalReport {
        let faults = (0..n_lanes)
            .map(|lane_idx| match lane_value(&value, lane_idx) {
                LaneValue::Number(x) => !x.is_finite(),
                _ => false,
            })
            .collect();
        EvalReport {
            n_lanes,
            grad: !grads.is_empty(),
            evaluation: Evaluation {
                value,
                grads: grads
                    .into_iter()
                    .map(|(name, per_lane)| Gradient {
                        name: name.to_string(),
                        per_lane,
                    })
                    .collect(),
                faults,
            },
        }
    }

    #[test]
    fn one_lane_human_and_json() {
        let r = report(
            1,
            Output::Number(vec![831.2208862304688]),
            vec![("r", vec![-7529.3095703125]), ("q", vec![1e-7])],
        );
        assert_eq!(
            r.to_human(),
            "value = 831.2208862304688\nd/dr = -7529.3095703125\nd/dq = 1e-7\n"
        );
        assert_eq!(
            r.to_json(),
            r#"{"value":831.2208862304688,"grads":{"r":-7529.3095703125,"q":1e-7},"fault":false}"#
        );
    }

    #[test]
    fn lanes_faults_and_non_finite() {
        let r = report(
            2,
            Output::Number(vec![1.0, f64::INFINITY]),
            vec![("q", vec![0.5, f64::NAN])],
        );
        assert_eq!(
            r.to_human(),
            "lane 0: value = 1.0  d/dq = 0.5\nlane 1: value = inf  d/dq = nan  (fault)\n"
        );
        assert_eq!(
            r.to_json(),
            r#"{"lanes":2,"value":[1.0,"inf"],"grads":{"q":[0.5,"nan"]},"faults":[false,true]}"#
        );
    }

    #[test]
    fn vectors_matrices_and_uniform_outputs() {
        let r = report(
            2,
            Output::Matrix {
                rows: 2,
                cols: 2,
                data: vec![1.0, 2.0, 3.0, 4.0],
            },
            vec![],
        );
        assert_eq!(
            r.to_human(),
            "lane 0: value = [[1.0, 2.0], [3.0, 4.0]]\nlane 1: value = [[1.0, 2.0], [3.0, 4.0]]\n"
        );
        let v = report(
            1,
            Output::Vector {
                len: 2,
                data: vec![-0.0, 2.5],
            },
            vec![],
        );
        assert_eq!(v.to_json(), r#"{"value":[-0.0,2.5],"fault":false}"#);
    }

    #[test]
    fn non_finite_numbers_are_strings() {
        let xs = [f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0].map(JsonNumber);
        assert_eq!(json_line(&xs), r#"["inf","-inf","nan",-0.0]"#);
    }

    #[test]
    fn json_numbers_round_trip() {
        for x in [
            0.1,
            1.0 / 3.0,
            1e300,
            5e-324,
            -123456789.125,
            831.2208862304688,
        ] {
            let s = json_line(&JsonNumber(x));
            assert_eq!(s.parse::<f64>().unwrap().to_bits(), x.to_bits(), "{s}");
            assert_eq!(
                human_number(x).parse::<f64>().unwrap().to_bits(),
                x.to_bits()
            );
        }
    }
}
