pub mod period;
