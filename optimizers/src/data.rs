//! `Dataset`: what a program is fitted to: named per-point input columns, the target, optional
//! weights, and inputs shared by every point (scalars, vectors, matrices).

use crate::error::{CalibrateError, Result};

/// One per-point input: the value of variable `name` at each data point.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// The variable name the program refers to.
    pub name: String,
    /// One value per data point.
    pub values: Vec<f64>,
}

/// An input with the same value at every data point.
#[derive(Clone, Debug, PartialEq)]
pub enum Shared {
    /// A number.
    Scalar(f64),
    /// A vector (read with `ref`).
    Vector(Vec<f64>),
    /// A row-major matrix (read with `ref`).
    Matrix {
        /// Row count.
        rows: usize,
        /// Column count.
        cols: usize,
        /// `rows * cols` values, row-major.
        data: Vec<f64>,
    },
}

/// The data a program is fitted to. Build it with the chained methods:
///
/// ```
/// use ndvm_optimizers::Dataset;
/// let data = Dataset::new().column("x", vec![0.0, 1.0, 2.0]).target(vec![1.0, 3.0, 5.0]);
/// assert_eq!(data.n_points(), 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dataset {
    /// Per-point inputs, all of the same length.
    pub columns: Vec<Column>,
    /// The value the program should produce at each point (absent for `Loss::ProgramLoss`).
    pub target: Option<Vec<f64>>,
    /// Per-point weights for `Loss::WeightedMse` and `Loss::GaussianNll` (non-negative, not all
    /// zero).
    pub weights: Option<Vec<f64>>,
    /// Inputs shared by every point, by name.
    pub shared: Vec<(String, Shared)>,
}

impl Dataset {
    /// An empty data set (one point, no inputs): enough for a program that returns its own loss.
    pub fn new() -> Self {
        Dataset::default()
    }

    /// Adds a per-point input column.
    pub fn column(mut self, name: &str, values: Vec<f64>) -> Self {
        self.columns.push(Column {
            name: name.to_string(),
            values,
        });
        self
    }

    /// Sets the target.
    pub fn target(mut self, values: Vec<f64>) -> Self {
        self.target = Some(values);
        self
    }

    /// Sets the weights.
    pub fn weights(mut self, values: Vec<f64>) -> Self {
        self.weights = Some(values);
        self
    }

    /// Adds a shared scalar input.
    pub fn scalar(mut self, name: &str, value: f64) -> Self {
        self.shared.push((name.to_string(), Shared::Scalar(value)));
        self
    }

    /// Adds a shared vector input.
    pub fn vector(mut self, name: &str, data: Vec<f64>) -> Self {
        self.shared.push((name.to_string(), Shared::Vector(data)));
        self
    }

    /// Adds a shared row-major matrix input.
    pub fn matrix(mut self, name: &str, rows: usize, cols: usize, data: Vec<f64>) -> Self {
        self.shared
            .push((name.to_string(), Shared::Matrix { rows, cols, data }));
        self
    }

    /// Number of data points N: the length of the columns and target, or 1 when there are none.
    pub fn n_points(&self) -> usize {
        self.target
            .as_ref()
            .map(Vec::len)
            .or_else(|| self.columns.first().map(|c| c.values.len()))
            .unwrap_or(1)
    }

    /// Every input name (columns, then shared), in order.
    pub(crate) fn input_names(&self) -> impl Iterator<Item = &str> {
        self.columns
            .iter()
            .map(|c| c.name.as_str())
            .chain(self.shared.iter().map(|(n, _)| n.as_str()))
    }

    /// Checks lengths, finiteness of weights and duplicate names.
    pub(crate) fn validate(&self) -> Result<()> {
        let bad = |message: String| Err(CalibrateError::InvalidData { message });
        let n = self.n_points();
        if n == 0 {
            return bad("there are no data points".to_string());
        }
        for c in &self.columns {
            if c.values.len() != n {
                return bad(format!(
                    "column `{}` has {} values but there are {n} points",
                    c.name,
                    c.values.len()
                ));
            }
        }
        if let Some(w) = &self.weights {
            if w.len() != n {
                return bad(format!("{} weights for {n} points", w.len()));
            }
            if w.iter().any(|x| !(*x >= 0.0 && x.is_finite())) {
                return bad("weights must be finite and non-negative".to_string());
            }
            if w.iter().sum::<f64>() <= 0.0 {
                return bad("the weights sum to zero".to_string());
            }
        }
        if let Some(t) = &self.target
            && t.iter().any(|x| !x.is_finite())
        {
            return bad("the target holds a non-finite value".to_string());
        }
        let names: Vec<&str> = self.input_names().collect();
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return bad(format!("input `{name}` is given twice"));
            }
        }
        for (name, value) in &self.shared {
            if let Shared::Matrix { rows, cols, data } = value
                && rows * cols != data.len()
            {
                return bad(format!(
                    "matrix `{name}` is {rows}x{cols} but holds {} values",
                    data.len()
                ));
            }
        }
        Ok(())
    }
}
