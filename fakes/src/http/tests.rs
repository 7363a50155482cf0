//! Tests of the HTTP and UDP front ends.
